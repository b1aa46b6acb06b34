//! `GeoIp` on MaxMind DB files written at test time by an independent writer (PyPI's
//! `mmdb-writer`, `write_mmdb.py`), in the layouts people download; every expected value is read
//! back with another independent reader, `mmdblookup` (Debian's `mmdb-bin`). Both are installed
//! by `scripts/install-test-deps.sh`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use exitvoice_geo::{GeoError, GeoIp, Refreshed};
use exitvoice_schema::Place;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Writes `out` in `layout` with `entries` (`NETWORK=COUNTRY,ASN,ORGANIZATION`).
fn write(out: &Path, layout: &str, entries: &[&str]) {
    let status = Command::new(root().join(".tools/venv/bin/python"))
        .arg(root().join("geo/tests/write_mmdb.py"))
        .arg(out)
        .arg(layout)
        .args(entries)
        .status()
        .expect("the test venv's python (scripts/install-test-deps.sh)");
    assert!(status.success(), "write_mmdb.py {layout}");
}

/// `mmdblookup`'s value at `path` (e.g. `country iso_code`) for `ip`, read from its output
/// (`"Example Carrier" <utf8_string>`, `64500 <uint32>`); `None` when it finds none.
fn mmdblookup(file: &Path, ip: &str, path: &[&str]) -> Option<String> {
    let out = Command::new("mmdblookup")
        .arg("--file")
        .arg(file)
        .args(["--ip", ip])
        .args(path)
        .output()
        .expect("mmdblookup (apt mmdb-bin)");
    let text = String::from_utf8_lossy(&out.stdout);
    let (value, _type) = text.trim().rsplit_once(" <")?;
    Some(value.trim_matches('"').to_owned())
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("address")
}

#[test]
fn maxmind_layout_country_and_asn_files_answer_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let country = dir.path().join("GeoLite2-Country.mmdb");
    let asn = dir.path().join("GeoLite2-ASN.mmdb");
    write(
        &country,
        "maxmind-country",
        &["127.0.0.0/8=DE,0,-", "::1/128=FR,0,-"],
    );
    write(
        &asn,
        "maxmind-asn",
        &[
            "127.0.0.0/8=-,64500,Example Carrier",
            "::1/128=-,64501,Other Net",
        ],
    );
    let geo = GeoIp::open(&[country.clone(), asn.clone()]).expect("open");
    for address in ["127.0.0.1", "127.3.4.5", "::1"] {
        let expected = Place {
            country: mmdblookup(&country, address, &["country", "iso_code"]),
            asn: mmdblookup(&asn, address, &["autonomous_system_number"])
                .map(|n| n.parse().expect("a number")),
            organization: mmdblookup(&asn, address, &["autonomous_system_organization"]),
        };
        assert!(expected.country.is_some(), "mmdblookup found {address}");
        assert_eq!(geo.place(ip(address)), expected, "{address}");
    }
    let sources = geo.sources();
    assert_eq!(sources[0].file, "GeoLite2-Country.mmdb");
    assert_eq!(sources[0].database_type, "GeoLite2-Country");
    assert_eq!(sources[1].database_type, "GeoLite2-ASN");
    assert_eq!(sources[0].build_date.len(), 10, "{:?}", sources[0]);
    assert_eq!(
        geo.place(ip("192.0.2.1")),
        Place::default(),
        "not in either"
    );
    assert_eq!(geo.lookup_errors(), 0);
}

#[test]
fn an_ipinfo_lite_file_carries_country_and_network() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ipinfo_lite.mmdb");
    write(&file, "ipinfo", &["127.0.0.0/8=NL,64502,Lite Networks BV"]);
    let geo = GeoIp::open(std::slice::from_ref(&file)).expect("open");
    let place = geo.place(ip("127.0.0.1"));
    assert_eq!(
        place.country,
        mmdblookup(&file, "127.0.0.1", &["country_code"])
    );
    let asn = mmdblookup(&file, "127.0.0.1", &["asn"]).expect("asn");
    assert_eq!(place.asn.map(|n| format!("AS{n}")), Some(asn));
    assert_eq!(place.organization.as_deref(), Some("Lite Networks BV"));
}

#[test]
fn a_missing_truncated_or_foreign_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.mmdb");
    let error = GeoIp::open(std::slice::from_ref(&missing)).expect_err("missing");
    assert!(matches!(error, GeoError::Read { .. }), "{error}");
    assert!(error.to_string().contains("missing.mmdb"), "{error}");

    let good = dir.path().join("good.mmdb");
    write(&good, "maxmind-country", &["127.0.0.0/8=DE,0,-"]);
    let bytes = std::fs::read(&good).expect("read");
    let truncated = dir.path().join("truncated.mmdb");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let foreign = dir.path().join("labels.json");
    std::fs::write(&foreign, b"{\"not\": \"a database\"}").expect("write");
    for file in [truncated, foreign] {
        let error = GeoIp::open(&[good.clone(), file.clone()]).expect_err("bad file");
        assert!(matches!(error, GeoError::Format { .. }), "{error}");
        let name = file.file_name().expect("name").to_string_lossy();
        assert!(error.to_string().contains(name.as_ref()), "{error}");
    }
}

#[test]
fn a_database_replaced_by_rename_or_in_place_is_read_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("country.mmdb");
    write(&file, "maxmind-country", &["127.0.0.0/8=DE,0,-"]);
    let geo = GeoIp::open(std::slice::from_ref(&file)).expect("open");
    assert!(geo.refresh().is_empty(), "nothing changed");
    let country = || geo.place(ip("127.0.0.1")).country;
    assert_eq!(country().as_deref(), Some("DE"));

    // Replaced by rename, as downloaders do.
    let next = dir.path().join("country.mmdb.new");
    write(&next, "maxmind-country", &["127.0.0.0/8=AT,0,-"]);
    std::fs::rename(&next, &file).expect("rename");
    let outcomes = geo.refresh();
    assert!(
        matches!(outcomes.as_slice(), [Refreshed::Reloaded(_)]),
        "{outcomes:?}"
    );
    assert_eq!(
        country(),
        mmdblookup(&file, "127.0.0.1", &["country", "iso_code"])
    );
    assert_eq!(country().as_deref(), Some("AT"));

    // Rewritten in place (same inode), first with a torn file, then whole.
    let torn = dir.path().join("torn.mmdb");
    write(
        &torn,
        "maxmind-country",
        &["127.0.0.0/8=CH,0,-", "10.0.0.0/8=CH,0,-"],
    );
    let whole = std::fs::read(&torn).expect("read");
    std::fs::write(&file, &whole[..whole.len() / 3]).expect("write in place");
    let outcomes = geo.refresh();
    assert!(
        matches!(
            outcomes.as_slice(),
            [Refreshed::Failed(GeoError::Format { .. })]
        ),
        "{outcomes:?}"
    );
    assert_eq!(
        country().as_deref(),
        Some("AT"),
        "the last good contents stay"
    );
    assert!(
        geo.refresh().is_empty(),
        "a failed file is not read again unchanged"
    );
    std::fs::write(&file, &whole).expect("write in place");
    let outcomes = geo.refresh();
    assert!(
        matches!(outcomes.as_slice(), [Refreshed::Reloaded(_)]),
        "{outcomes:?}"
    );
    assert_eq!(country().as_deref(), Some("CH"));
}
