#!/usr/bin/env python3
"""Build and decode HTTP/2 client-prefix fixtures with python-hyper (an independent oracle).

Writes protocol/tests/data/h2/<name>.bin (the client bytes, preface first) and <name>.json
(what hyperframe and hpack decode from those bytes, plus the Akamai string computed here from the
decoded frames with the rules of Akamai's paper, docs/voice-http.md). The Rust tests compare
their parser with these JSON files; nothing here imports or runs our Rust code.

Run:  .tools/venv/bin/python tests/tools/h2_vectors.py           (regenerate)
      .tools/venv/bin/python tests/tools/h2_vectors.py --check   (decode the committed .bin files
                                                                   and compare with the .json)
Needs: pip install h2 hpack hyperframe   (versions used: h2 4.x, hpack 4.x, hyperframe 6.x)
"""

import json
import pathlib
import sys

import h2.config
import h2.connection
import hpack
from hyperframe.frame import (
    ContinuationFrame,
    Frame,
    HeadersFrame,
    PriorityFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
OUT = pathlib.Path(__file__).resolve().parents[2] / "echo-server" / "tests" / "data" / "h2"

CHROME_HEADERS = [
    (":method", "GET"),
    (":authority", "echo.example"),
    (":scheme", "https"),
    (":path", "/probe/abc"),
    ("sec-ch-ua", '"Chromium";v="131", "Not_A Brand";v="24"'),
    ("sec-ch-ua-mobile", "?0"),
    ("sec-ch-ua-platform", '"Linux"'),
    ("upgrade-insecure-requests", "1"),
    ("user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                   "Chrome/131.0.0.0 Safari/537.36"),
    ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
               "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"),
    ("sec-fetch-site", "none"),
    ("sec-fetch-mode", "navigate"),
    ("sec-fetch-user", "?1"),
    ("sec-fetch-dest", "document"),
    ("accept-encoding", "gzip, deflate, br, zstd"),
    ("accept-language", "en-US,en;q=0.9"),
    ("priority", "u=0, i"),
]

FIREFOX_HEADERS = [
    (":method", "GET"),
    (":path", "/probe/abc"),
    (":authority", "echo.example"),
    (":scheme", "https"),
    ("user-agent", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"),
    ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("accept-language", "en-US,en;q=0.5"),
    ("accept-encoding", "gzip, deflate, br, zstd"),
    ("upgrade-insecure-requests", "1"),
    ("sec-fetch-dest", "document"),
    ("sec-fetch-mode", "navigate"),
    ("sec-fetch-site", "none"),
    ("sec-fetch-user", "?1"),
    ("priority", "u=0, i"),
    ("te", "trailers"),
]


def settings(pairs):
    # Written by hand: hyperframe's SettingsFrame masks ids with 0xFF when serializing, which
    # would turn a GREASE id 0x1a1a into 0x1a. (Parsing, used by decode() below, does not mask.)
    body = b"".join(k.to_bytes(2, "big") + v.to_bytes(4, "big") for k, v in pairs)
    return len(body).to_bytes(3, "big") + bytes([0x4, 0]) + (0).to_bytes(4, "big") + body


def headers(stream, block, flags, **prio):
    f = HeadersFrame(stream)
    f.data = block
    f.flags = set(flags)
    for k, v in prio.items():
        setattr(f, k, v)
    return f.serialize()


def window_update(stream, inc):
    f = WindowUpdateFrame(stream)
    f.window_increment = inc
    return f.serialize()


def priority(stream, dep, weight_byte, exclusive):
    f = PriorityFrame(stream)
    f.depends_on = dep
    f.stream_weight = weight_byte
    f.exclusive = exclusive
    return f.serialize()


def chrome():
    enc = hpack.Encoder()
    block = enc.encode(CHROME_HEADERS, huffman=True)
    return PREFACE + b"".join([
        settings([(1, 65536), (2, 0), (4, 6291456), (6, 262144)]),
        window_update(0, 15663105),
        # PRIORITY flag, exclusive, dependency 0, weight byte 255 = weight 256.
        headers(1, block, ["END_HEADERS", "END_STREAM", "PRIORITY"],
                depends_on=0, stream_weight=255, exclusive=True),
    ])


def chrome_grease():
    # Chrome-shaped with a GREASE setting id (0x?a?a) and a GREASE frame type (0x0b + 0x1f * 1).
    enc = hpack.Encoder()
    block = enc.encode(CHROME_HEADERS, huffman=True)
    grease_frame = (4).to_bytes(3, "big") + bytes([0x2a, 0, 0, 0, 0, 0]) + b"\x01\x02\x03\x04"
    return PREFACE + b"".join([
        settings([(1, 65536), (2, 0), (4, 6291456), (6, 262144), (0x1A1A, 0x2B2B2B)]),
        window_update(0, 15663105),
        headers(1, block, ["END_HEADERS", "END_STREAM", "PRIORITY"],
                depends_on=0, stream_weight=255, exclusive=True),
        grease_frame,
    ])


def firefox():
    enc = hpack.Encoder()
    block = enc.encode(FIREFOX_HEADERS, huffman=True)
    return PREFACE + b"".join([
        settings([(1, 65536), (2, 0), (4, 131072), (5, 16384)]),
        window_update(0, 12517377),
        headers(15, block, ["END_HEADERS", "END_STREAM", "PRIORITY"],
                depends_on=0, stream_weight=41, exclusive=False),
    ])


def firefox_legacy_tree():
    # Firefox 53-style PRIORITY tree (the Akamai paper's example).
    enc = hpack.Encoder()
    block = enc.encode(FIREFOX_HEADERS, huffman=True)
    tree = [(3, 0, 200), (5, 0, 100), (7, 0, 0), (9, 7, 0), (11, 3, 0)]
    return PREFACE + b"".join(
        [settings([(1, 65536), (4, 131072), (5, 16384)]), window_update(0, 12517377)]
        + [priority(s, d, w, False) for s, d, w in tree]
        + [headers(13, block, ["END_HEADERS", "END_STREAM", "PRIORITY"],
                   depends_on=11, stream_weight=0, exclusive=False)]
    )


def continuation_two_requests():
    # Two requests on one connection; the first block split into HEADERS + 2 CONTINUATION, the
    # second using dynamic-table entries from the first; one never-indexed field.
    enc = hpack.Encoder()
    first = enc.encode(
        [(":method", "GET"), (":scheme", "https"), (":path", "/a"), (":authority", "echo.example"),
         ("x-token", "one"), hpack.NeverIndexedHeaderTuple("authorization", "secret")],
        huffman=False)
    second = enc.encode(
        [(":method", "GET"), (":scheme", "https"), (":path", "/b"), (":authority", "echo.example"),
         ("x-token", "two")], huffman=True)
    a, b, c = first[:7], first[7:20], first[20:]
    cont1 = ContinuationFrame(1)
    cont1.data = b
    cont2 = ContinuationFrame(1)
    cont2.data = c
    cont2.flags = {"END_HEADERS"}
    return PREFACE + b"".join([
        settings([(3, 100), (4, 65536), (2, 0)]),
        window_update(0, 10420225),
        headers(1, a, ["END_STREAM"]),
        cont1.serialize(),
        cont2.serialize(),
        headers(3, second, ["END_HEADERS", "END_STREAM"]),
    ])


def h2_library_client():
    # What the python-hyper h2 state machine itself writes as a client.
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "GET"), (":path", "/"), (":scheme", "https"),
                          (":authority", "echo.example"), ("user-agent", "python-h2")],
                      end_stream=True)
    return conn.data_to_send()


FIXTURES = {
    "chrome_shaped": chrome,
    "chrome_grease": chrome_grease,
    "firefox_shaped": firefox,
    "firefox_legacy_tree": firefox_legacy_tree,
    "continuation_two_requests": continuation_two_requests,
    "python_h2_client": h2_library_client,
}


def decode(data):
    """Decode client bytes with hyperframe + hpack into plain JSON values."""
    assert data.startswith(PREFACE)
    pos = len(PREFACE)
    dec = hpack.Decoder()
    frames, blocks, pending = [], [], None
    while pos < len(data):
        hdr = data[pos:pos + 9]
        frame, length = Frame.parse_frame_header(memoryview(hdr))
        raw_type, raw_flags = hdr[3], hdr[4]
        body = data[pos + 9:pos + 9 + length]
        pos += 9 + length
        entry = {"type": raw_type, "flags": raw_flags, "stream_id": frame.stream_id,
                 "length": length}
        if frame.type is not None and not isinstance(frame, type(None)):
            try:
                frame.parse_body(memoryview(body))
            except Exception:  # unknown types: hyperframe gives ExtensionFrame
                pass
        if isinstance(frame, SettingsFrame):
            entry["settings"] = [[k, v] for k, v in frame.settings.items()]
        elif isinstance(frame, WindowUpdateFrame):
            entry["increment"] = frame.window_increment
        elif isinstance(frame, PriorityFrame):
            entry["priority"] = [frame.exclusive, frame.depends_on, frame.stream_weight]
        elif isinstance(frame, HeadersFrame):
            if "PRIORITY" in frame.flags:
                entry["priority"] = [frame.exclusive, frame.depends_on, frame.stream_weight]
            pending = (frame.stream_id, bytes(frame.data))
            if "END_HEADERS" in frame.flags:
                blocks.append(pending)
                pending = None
        elif isinstance(frame, ContinuationFrame):
            pending = (pending[0], pending[1] + bytes(frame.data))
            if "END_HEADERS" in frame.flags:
                blocks.append(pending)
                pending = None
        frames.append(entry)
    requests = []
    for stream, block in blocks:
        fields = dec.decode(block, raw=True)
        requests.append({"stream_id": stream,
                         "fields": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in fields]})
    return {"frames": frames, "requests": requests, "akamai": akamai(frames, requests)}


def akamai(frames, requests):
    """Akamai string as Akamai's paper defines it, from the decoded values."""
    first_headers = next((i for i, f in enumerate(frames) if f["type"] == 1), len(frames))
    before = frames[:first_headers]
    s = next((f["settings"] for f in frames
              if f["type"] == 4 and not f["flags"] & 1 and f["stream_id"] == 0), [])
    wu = next((f["increment"] for f in before if f["type"] == 8 and f["stream_id"] == 0), None)
    prio = [f"{f['stream_id']}:{int(f['priority'][0])}:{f['priority'][1]}:{f['priority'][2] + 1}"
            for f in before if f["type"] == 2]
    letters = {":method": "m", ":authority": "a", ":scheme": "s", ":path": "p"}
    ps = [letters[n] for n, _ in (requests[0]["fields"] if requests else []) if n in letters]
    return "|".join([";".join(f"{k}:{v}" for k, v in s),
                     "00" if wu is None else str(wu),
                     ",".join(prio) if prio else "0",
                     ",".join(ps)])


def main():
    check = "--check" in sys.argv
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in FIXTURES.items():
        bin_path, json_path = OUT / f"{name}.bin", OUT / f"{name}.json"
        if check:
            got = decode(bin_path.read_bytes())
            want = json.loads(json_path.read_text())
            assert got == {k: want[k] for k in got}, name
            print(f"ok {name}")
            continue
        data = build()
        bin_path.write_bytes(data)
        out = decode(data)
        out = {"source": "tests/tools/h2_vectors.py (python-hyper h2/hpack/hyperframe)",
               "fixture": name, **out}
        json_path.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {name}: {len(data)} bytes, akamai {out['akamai']}")


if __name__ == "__main__":
    main()
