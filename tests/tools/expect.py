#!/usr/bin/env python3
"""Expected fingerprint values for captures/, from independent sources only.

Never from the project's own Rust code. For each ``captures/<client>/`` directory it reads
``capture.json`` (provenance, written by scripts/record-captures.sh), the two connections'
``conn{1,2}.hello.bin`` / ``conn{1,2}.prefix.bin`` and ``capture.pcapng`` (TLS secrets embedded),
and writes ``connections[i].expected`` back into ``capture.json``. Each value names its sources:

- JA3 and the JA3 string: Debian's tshark (``tls.handshake.ja3`` / ``tls.handshake.ja3_full``)
  on the pcapng, for the handshake whose ClientHello random equals the one in ``connN.hello.bin``.
- JA4, JA4_r, JA4_o, JA4_ro: the PyPI ``ja4plus`` package over ``connN.hello.bin``, only when the
  package reproduces the public vectors (``--ja4-vectors``; see ``ja4plus_check``) and the hello is
  outside the two classes where it is known to differ from the spec (a hello whose only extensions
  are SNI/ALPN; a first ALPN name that does not start and end with an ASCII letter or digit).
- HTTP/2: the tshark HTTP/2 dissector (decrypting with the embedded secrets) AND Python
  hyperframe + hpack over ``connN.prefix.bin``: SETTINGS in order, connection WINDOW_UPDATE,
  PRIORITY frames, the first HEADERS frame's priority fields, pseudo-header order and regular
  header order; the two must agree or the script fails. The Akamai string
  (``S|WU|P|PS``, fingerprints spec section 4) is composed from those decoded fields.
- HTTP/1.x: request line and header names in order from tshark's HTTP dissector AND a plain
  split of ``connN.prefix.bin`` (RFC 9112 section 2.1); the two must agree.

Usage: ``expect.py captures/<client> [...]`` (``--all`` for every directory under captures/).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import hpack
import hyperframe.frame as hf

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
PSEUDO_LETTER = {":method": "m", ":authority": "a", ":scheme": "s", ":path": "p"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tshark_version() -> str:
    out = subprocess.run(["tshark", "--version"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[0].strip()


def pkg(name: str) -> str:
    return f"{name} {md.version(name)}"


class Disagree(Exception):
    """Two independent sources gave different values."""


# --- TLS ----------------------------------------------------------------------------------------

def hello_random(hello: bytes) -> str:
    # record header (5) + handshake header (4) + legacy_version (2), then 32 bytes of random.
    return hello[11:43].hex()


def tshark_hellos(pcap: str, port: int) -> dict[str, dict]:
    """ClientHello random -> {stream, ja3, ja3_full} from tshark's TLS dissector."""
    out = subprocess.run(
        ["tshark", "-r", pcap, "-d", f"tcp.port=={port},tls", "-Y", "tls.handshake.type == 1",
         "-T", "fields", "-E", "separator=\t", "-e", "tcp.stream", "-e", "tls.handshake.random",
         "-e", "tls.handshake.ja3", "-e", "tls.handshake.ja3_full"],
        capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        stream, rnd, ja3, full = (line.split("\t") + ["", "", "", ""])[:4]
        res[rnd.replace(":", "").lower()] = {"stream": int(stream), "ja3": ja3, "ja3_full": full}
    return res


def ja4plus_check(vectors: str) -> dict:
    """Runs ja4plus over the public JA4 vectors; returns counts and the mismatching cases."""
    from ja4plus.fingerprinters.ja4 import generate_ja4, get_raw_fingerprint
    from ja4plus.utils.tls_utils import parse_tls_handshake

    n = ok = 0
    misses = []
    with open(vectors) as f:
        for line in f:
            v = json.loads(line)
            hs = bytes.fromhex(v["client_hello_hex"])
            rec = b"".join(b"\x16\x03\x01" + len(hs[i:i + 16384]).to_bytes(2, "big") + hs[i:i + 16384]
                           for i in range(0, len(hs), 16384))
            info = parse_tls_handshake(rec)
            if info is not None and v.get("transport") == "quic":
                info["is_quic"] = True
            got = (generate_ja4(info), get_raw_fingerprint(info), generate_ja4(info, True),
                   get_raw_fingerprint(info, True))
            exp = (v["ja4_spec"], v["ja4_r_spec"], v["ja4_o_spec"], v["ja4_ro_spec"])
            n += 1
            if got == exp:
                ok += 1
            else:
                misses.append({"pcap": v["pcap"], "frame": v["frame"], "expected": exp[0], "got": got[0],
                               "known_divergence": ja4plus_divergent(info)})
    return {"vectors": n, "equal": ok, "misses": misses}


def ja4plus_divergent(info: dict | None) -> str | None:
    """Names the hello classes where ja4plus is known to differ from the JA4 spec, else None."""
    if not info:
        return "unparsed"
    exts = [e for e in info.get("extensions", []) if e not in (0, 16) and not is_grease(e)]
    if not exts:
        return "no extension besides SNI/ALPN (ja4plus writes 000000000000 for JA4_c)"
    alpn = info.get("alpn_raw") or []
    if alpn and alpn[0]:
        first = alpn[0]
        if not (chr(first[0]).isascii() and chr(first[0]).isalnum()
                and chr(first[-1]).isascii() and chr(first[-1]).isalnum()):
            return "first ALPN name not alphanumeric at both ends (ja4plus writes 99)"
    return None


def is_grease(v: int) -> bool:
    return v & 0x0F0F == 0x0A0A and (v >> 8) == (v & 0xFF)


def ja4_values(hello: bytes, trusted: bool, src: str) -> dict:
    if not trusted:
        return {}
    from ja4plus.fingerprinters.ja4 import generate_ja4, get_raw_fingerprint
    from ja4plus.utils.tls_utils import parse_tls_handshake

    info = parse_tls_handshake(hello)
    why = ja4plus_divergent(info)
    if why:
        return {"ja4_omitted": {"value": None, "reason": why}}
    return {
        "ja4": {"value": generate_ja4(info), "sources": [src]},
        "ja4_r": {"value": get_raw_fingerprint(info), "sources": [src]},
        "ja4_o": {"value": generate_ja4(info, True), "sources": [src]},
        "ja4_ro": {"value": get_raw_fingerprint(info, True), "sources": [src]},
    }


def tshark_client_bytes(pcap: str, port: int, stream: int, upto: int) -> bytes:
    """The first `upto` client->server TCP payload bytes of one stream, as tshark reads them."""
    out = subprocess.run(
        ["tshark", "-r", pcap, "-Y", f"tcp.stream == {stream} && tcp.dstport == {port} && tcp.len > 0",
         "-T", "fields", "-e", "tcp.payload"],
        capture_output=True, text=True, check=True).stdout
    data = b""
    for line in out.split():
        data += bytes.fromhex(line.replace(":", ""))
        if len(data) >= upto:
            break
    return data[:upto]


# --- HTTP/2 ---------------------------------------------------------------------------------------

def h2_summary(frames: list[dict]) -> dict:
    """Fields up to and including the first HEADERS frame, and the Akamai string built from them."""
    settings = None
    wu = None
    prio = []
    first_headers = None
    for fr in frames:
        if fr["type"] == "SETTINGS" and fr["stream"] == 0 and not fr.get("ack") and settings is None:
            settings = fr["settings"]
        elif fr["type"] == "WINDOW_UPDATE" and fr["stream"] == 0 and wu is None:
            wu = fr["increment"]
        elif fr["type"] == "PRIORITY":
            prio.append([fr["stream"], fr["exclusive"], fr["depends_on"], fr["weight"]])
        elif fr["type"] == "HEADERS":
            first_headers = fr
            break
    if settings is None or first_headers is None:
        raise Disagree("no SETTINGS or no HEADERS in the prefix")
    names = first_headers["header_names"]
    pseudo = [n for n in names if n.startswith(":")]
    regular = [n for n in names if not n.startswith(":")]
    akamai = "|".join([
        ";".join(f"{i}:{v}" for i, v in settings),
        str(wu) if wu is not None else "00",
        ",".join(f"{s}:{e}:{d}:{w}" for s, e, d, w in prio) if prio else "0",
        ",".join(PSEUDO_LETTER[n] for n in pseudo if n in PSEUDO_LETTER),
    ])
    return {
        "h2_settings": settings,
        "h2_window_update": wu,
        "h2_priority_frames": prio,
        "h2_headers_priority": first_headers.get("priority"),
        "h2_first_stream_id": first_headers["stream"],
        "h2_pseudo_header_order": pseudo,
        "h2_header_order": regular,
        "akamai": akamai,
        "akamai_hash": hashlib.md5(akamai.encode()).hexdigest(),
    }


def hyperframe_frames(prefix: bytes) -> list[dict]:
    """Decodes the client's frames with hyperframe; HPACK with one hpack decoder per connection."""
    if not prefix.startswith(H2_PREFACE):
        raise Disagree("prefix does not start with the HTTP/2 preface")
    dec = hpack.Decoder()
    p = len(H2_PREFACE)
    out = []
    block = b""
    pending = None
    while p + 9 <= len(prefix):
        frame, length = hf.Frame.parse_frame_header(memoryview(prefix[p:p + 9]))
        if p + 9 + length > len(prefix):
            break
        frame.parse_body(memoryview(prefix[p + 9:p + 9 + length]))
        p += 9 + length
        name = type(frame).__name__.replace("Frame", "")
        tname = {"Settings": "SETTINGS", "WindowUpdate": "WINDOW_UPDATE", "Headers": "HEADERS",
                 "Priority": "PRIORITY", "Continuation": "CONTINUATION", "Data": "DATA",
                 "RstStream": "RST_STREAM", "GoAway": "GOAWAY", "Ping": "PING",
                 "PushPromise": "PUSH_PROMISE", "ExtensionFrame": "UNKNOWN"}.get(name, name.upper())
        fr = {"type": tname, "stream": frame.stream_id, "flags": sorted(frame.flags), "length": length}
        if isinstance(frame, hf.SettingsFrame):
            fr["ack"] = "ACK" in frame.flags
            # hyperframe keeps settings in a dict: re-read the wire order from the payload itself.
            body = prefix[p - length:p]
            fr["settings"] = [[int.from_bytes(body[i:i + 2], "big"), int.from_bytes(body[i + 2:i + 6], "big")]
                              for i in range(0, len(body) - 5, 6)]
            if {k: v for k, v in fr["settings"]} != dict(frame.settings):
                raise Disagree(f"settings walk {fr['settings']} != hyperframe {frame.settings}")
        elif isinstance(frame, hf.WindowUpdateFrame):
            fr["increment"] = frame.window_increment
        elif isinstance(frame, hf.PriorityFrame):
            fr.update(exclusive=int(frame.exclusive), depends_on=frame.depends_on, weight=frame.stream_weight + 1)
        elif isinstance(frame, hf.HeadersFrame):
            if "PRIORITY" in frame.flags:
                fr["priority"] = {"exclusive": int(frame.exclusive), "depends_on": frame.depends_on,
                                  "weight": frame.stream_weight + 1}
            pending, block = fr, frame.data
        elif isinstance(frame, hf.ContinuationFrame):
            block += frame.data
        if isinstance(frame, (hf.HeadersFrame, hf.ContinuationFrame)) and "END_HEADERS" in frame.flags \
                and pending is not None:
            pending["header_names"] = [n.decode("latin-1") for n, _ in dec.decode(block, raw=True)]
            pending = None
        out.append(fr)
    return [f for f in out if f["type"] != "HEADERS" or "header_names" in f]


def tshark_h2(pcap: str, port: int, stream: int) -> list[dict]:
    """The client's HTTP/2 frames on one TCP stream, from tshark's dissector (PDML)."""
    xml = subprocess.run(
        ["tshark", "-r", pcap, "-d", f"tcp.port=={port},tls", "-Y",
         f"tcp.stream == {stream} && tcp.dstport == {port} && http2", "-T", "pdml"],
        capture_output=True, check=True).stdout
    root = ET.fromstring(xml)
    out = []
    tnames = {0: "DATA", 1: "HEADERS", 2: "PRIORITY", 3: "RST_STREAM", 4: "SETTINGS", 5: "PUSH_PROMISE",
              6: "PING", 7: "GOAWAY", 8: "WINDOW_UPDATE", 9: "CONTINUATION"}
    for pkt in root.iter("packet"):
        for proto in pkt.findall("proto"):
            if proto.get("name") != "http2":
                continue
            for st in proto.findall("field"):
                if st.get("name") != "http2.stream":
                    continue
                f = {c.get("name"): c for c in st.iter("field")}
                if "http2.type" not in f:
                    continue  # the preface ("Magic")
                t = int(f["http2.type"].get("show"))
                fr = {"type": tnames.get(t, f"UNKNOWN({t})"), "stream": int(f["http2.streamid"].get("show"))}
                if t == 4:
                    fr["ack"] = f.get("http2.flags.ack.settings") is not None and f["http2.flags.ack.settings"].get("show") == "1"
                    fr["settings"] = []
                    for s in st.findall("field"):
                        if s.get("name") != "http2.settings":
                            continue
                        kids = list(s.findall("field"))
                        sid = int(next(k for k in kids if k.get("name") == "http2.settings.id").get("show"))
                        val = next(k for k in kids if k.get("name") != "http2.settings.id")
                        fr["settings"].append([sid, int(val.get("show"))])
                elif t == 8:
                    fr["increment"] = int(f["http2.window_update.window_size_increment"].get("show"))
                elif t == 2:
                    fr.update(exclusive=1 if f["http2.exclusive"].get("show") in ("1", "True") else 0,
                              depends_on=int(f["http2.stream_dependency"].get("show")),
                              weight=int(f["http2.headers.weight_real"].get("show")))
                elif t == 1:
                    if f.get("http2.flags.priority") is not None and f["http2.flags.priority"].get("show") == "1":
                        fr["priority"] = {
                            "exclusive": 1 if f["http2.exclusive"].get("show") in ("1", "True") else 0,
                            "depends_on": int(f["http2.stream_dependency"].get("show")),
                            "weight": int(f["http2.headers.weight_real"].get("show"))}
                    fr["header_names"] = [c.get("show") for c in st.iter("field")
                                          if c.get("name") == "http2.header.name"]
                out.append(fr)
    return out


# --- HTTP/1.x -------------------------------------------------------------------------------------

def h1_from_prefix(prefix: bytes) -> dict:
    head = prefix.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    return {"http1_request_line": head[0],
            "http1_header_order": [line.split(":", 1)[0] for line in head[1:]]}


def tshark_h1(pcap: str, port: int, stream: int) -> dict:
    out = subprocess.run(
        ["tshark", "-r", pcap, "-d", f"tcp.port=={port},tls", "-Y",
         f"tcp.stream == {stream} && http.request", "-T", "fields", "-E", "occurrence=a",
         "-E", "aggregator=\x1f", "-e", "http.request.method", "-e", "http.request.uri",
         "-e", "http.request.version", "-e", "http.request.line"],
        capture_output=True, text=True, check=True).stdout
    line = out.splitlines()[0].split("\t")
    method, uri, version, lines = line[0], line[1], line[2], line[3].split("\x1f")
    return {"http1_request_line": f"{method} {uri} {version}",
            "http1_header_order": [hl.split(":", 1)[0] for hl in lines]}


# --- driver ---------------------------------------------------------------------------------------

def agree(a: dict, b: dict, keys, src_a: str, src_b: str) -> dict:
    res = {}
    for k in keys:
        if a[k] != b[k]:
            raise Disagree(f"{k}: {src_a} says {a[k]!r}, {src_b} says {b[k]!r}")
        res[k] = {"value": a[k], "sources": [src_a, src_b]}
    return res


def process(d: str, ja4_trust: dict) -> None:
    cap_path = os.path.join(d, "capture.json")
    with open(cap_path) as f:
        cap = json.load(f)
    port = int(re.search(r":(\d+)/", cap["url"]).group(1))
    pcap = os.path.join(d, "capture.pcapng")
    tsv = tshark_version().replace("TShark (Wireshark) ", "tshark ")
    hellos = tshark_hellos(pcap, port)
    ja4src = f"{pkg('ja4plus')} (generate_ja4 / get_raw_fingerprint over connN.hello.bin)"
    for conn in cap["connections"]:
        hello = open(os.path.join(d, conn["hello"]), "rb").read()
        prefix = open(os.path.join(d, conn["prefix"]), "rb").read()
        th = hellos.get(hello_random(hello))
        if th is None:
            raise Disagree(f"{d} {conn['name']}: ClientHello random not found in the pcapng")
        exp: dict = {
            "ja3": {"value": th["ja3"], "sources": [f"{tsv} tls.handshake.ja3"]},
            "ja3_string": {"value": th["ja3_full"], "sources": [f"{tsv} tls.handshake.ja3_full"]},
        }
        exp.update(ja4_values(hello, ja4_trust["trusted"], ja4src))
        conn["tcp_stream_in_pcapng"] = th["stream"]
        if tshark_client_bytes(pcap, port, th["stream"], len(hello)) != hello:
            raise Disagree(f"{d} {conn['name']}: {conn['hello']} is not the stream's first client bytes")
        conn["hello_checked_against_pcapng"] = True
        if prefix.startswith(H2_PREFACE):
            a = h2_summary(tshark_h2(pcap, port, th["stream"]))
            py_frames = hyperframe_frames(prefix)
            b = h2_summary(py_frames)
            keys = ["h2_settings", "h2_window_update", "h2_priority_frames", "h2_headers_priority",
                    "h2_first_stream_id", "h2_pseudo_header_order", "h2_header_order", "akamai", "akamai_hash"]
            exp.update(agree(a, b, keys, f"{tsv} http2 dissector (embedded TLS secrets)",
                             f"{pkg('hyperframe')} + {pkg('hpack')} over {conn['prefix']}"))
            conn["h2_frames"] = {"value": [{k: v for k, v in fr.items() if k != "header_names"}
                                           for fr in py_frames],
                                 "sources": [f"{pkg('hyperframe')} over {conn['prefix']}"]}
        elif prefix:
            a = tshark_h1(pcap, port, th["stream"])
            b = h1_from_prefix(prefix)
            exp.update(agree(a, b, ["http1_request_line", "http1_header_order"],
                             f"{tsv} http dissector (embedded TLS secrets)",
                             f"plain split of {conn['prefix']} (RFC 9112 section 2.1)"))
        conn["expected"] = exp
    cap["ja4plus_check"] = {k: v for k, v in ja4_trust.items() if k != "misses"}
    with open(cap_path + ".tmp", "w") as f:
        json.dump(cap, f, indent=2)
        f.write("\n")
    os.replace(cap_path + ".tmp", cap_path)


def default_vectors() -> str | None:
    for p in (os.path.join(ROOT, "echo-server", "tests", "data", "ja4", "clienthellos.jsonl"),
              os.path.join(os.path.dirname(ROOT), "shared", "conformance", "ja4", "clienthellos.jsonl"),
              "/work/shared/conformance/ja4/clienthellos.jsonl"):
        if os.path.exists(p):
            return p
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description="independent expected values for captures/")
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--all", action="store_true", help="every captures/<client>/ directory")
    ap.add_argument("--ja4-vectors", default=default_vectors(),
                    help="JSONL of ClientHellos with expected JA4 (public FoxIO vectors)")
    ap.add_argument("--check-ja4plus", action="store_true", help="only print the ja4plus vector check")
    args = ap.parse_args()
    trust = {"trusted": False, "reason": "no JA4 vectors to check ja4plus against"}
    if args.ja4_vectors:
        chk = ja4plus_check(args.ja4_vectors)
        unexplained = [m for m in chk["misses"] if not m["known_divergence"]]
        trust = {"trusted": not unexplained, "package": pkg("ja4plus"),
                 "vectors": os.path.basename(args.ja4_vectors), "vectors_total": chk["vectors"],
                 "vectors_equal": chk["equal"],
                 "rule": "trusted when every mismatch falls in a known divergence class; those classes "
                         "are excluded per hello",
                 "misses": chk["misses"]}
        if args.check_ja4plus:
            json.dump(trust, sys.stdout, indent=2)
            print()
            return
    dirs = list(args.dirs)
    if args.all:
        cdir = os.path.join(ROOT, "captures")
        dirs += [os.path.join(cdir, n) for n in sorted(os.listdir(cdir))
                 if os.path.exists(os.path.join(cdir, n, "capture.json"))]
    for d in dirs:
        process(d, trust)
        print(f"expect: {d} ok", file=sys.stderr)


if __name__ == "__main__":
    main()
