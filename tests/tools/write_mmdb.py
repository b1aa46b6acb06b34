"""Writes a MaxMind DB file for the geo tests with PyPI's mmdb-writer (an independent writer).

Usage: write_mmdb.py OUT LAYOUT NETWORK=COUNTRY,ASN,ORGANIZATION ...

LAYOUT is the record shape people download:
  maxmind-country  GeoLite2-Country / DB-IP country lite: {"country": {"iso_code": ...}}
  maxmind-asn      GeoLite2-ASN / DB-IP ASN lite: autonomous_system_number, _organization
  maxmind-asn-any-width  the same, the number written as mmdb-writer chooses for a plain int
                   (uint16 below 65,536, uint32 above, and so on)
  maxmind-asn-text the same, the number written as text: a record no reader of numbers takes
  ipinfo           IPinfo Lite: country_code, asn ("AS64500"), as_name
An IPv6 database that also holds IPv4 (::/96), as the downloads are; loopback networks included.
"""

import sys

from mmdb_writer import MMDBWriter, MmdbU32
from netaddr import IPSet

TYPES = {
    "maxmind-country": "GeoLite2-Country",
    "maxmind-asn": "GeoLite2-ASN",
    "maxmind-asn-any-width": "GeoLite2-ASN",
    "maxmind-asn-text": "GeoLite2-ASN",
    "ipinfo": "ipinfo_lite.mmdb",
}


def record(layout, country, asn, org):
    if layout == "maxmind-country":
        return {"country": {"iso_code": country, "names": {"en": country}}}
    if layout == "maxmind-asn":
        return {"autonomous_system_number": MmdbU32(int(asn)), "autonomous_system_organization": org}
    if layout == "maxmind-asn-any-width":
        return {"autonomous_system_number": int(asn), "autonomous_system_organization": org}
    if layout == "maxmind-asn-text":
        return {"autonomous_system_number": asn, "autonomous_system_organization": org}
    return {"country_code": country, "asn": f"AS{asn}", "as_name": org}


def main():
    out, layout, *entries = sys.argv[1:]
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type=TYPES[layout],
                        languages=["en"], description="exitvoice geo test")
    for entry in entries:
        network, values = entry.split("=", 1)
        country, asn, org = values.split(",", 2)
        writer.insert_network(IPSet([network]), record(layout, country, asn, org))
    writer.to_db_file(out)


main()
