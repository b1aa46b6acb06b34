#!/usr/bin/env python3
"""Capture recorder: a small TLS origin that records what each client sends, byte for byte.

Independent of the project's Rust code on purpose, so captures/ can check that code. For each
TCP connection on 127.0.0.1:PORT it

1. reads the raw TLS records of the ClientHello from the socket itself (every record until the
   handshake message is complete; cap 64 KiB) -> ``<out>/<conn-id>.hello.bin``, exactly as
   received;
2. feeds those bytes into ``ssl.SSLObject`` through a ``MemoryBIO`` and completes the handshake
   (ALPN ``h2``, ``http/1.1``; TLS secrets go to ``--keylog`` in NSS key log format, so tshark can
   decrypt the capture);
3. reads the first decrypted client bytes until the first request is complete (HTTP/2: the
   header block of the first request ends, RFC 9113 section 6.2 / 6.10; HTTP/1.x: the request
   head ends with an empty line, RFC 9112 section 2.1), or a quiet period passes, or 64 KiB
   -> ``<conn-id>.prefix.bin``. For HTTP/2 a trailing partial frame is cut off, so the file
   ends on a frame boundary;
4. answers properly (HTTP/2 through the ``h2`` library in server mode, fed with the same bytes;
   HTTP/1.x with a small 200 and Content-Length), so the client succeeds, and keeps serving the
   connection until the client closes it;
5. writes ``<conn-id>.json``: time, peer, SNI and ALPN offered (parsed minimally from the
   hello), ALPN negotiated, protocol actually spoken (sniffed from the first bytes), TLS version
   and cipher, whether the first request was complete, its method and path.

Python 3.11 stdlib + ``h2``. Usage::

    record.py --port 18443 --cert leaf-chain.pem --key leaf.key --out DIR --keylog FILE
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import ssl
import struct
import sys
import threading

import h2
import h2.config
import h2.connection
import h2.events
import h2.exceptions

HELLO_CAP = 64 * 1024
PREFIX_CAP = 64 * 1024
HANDSHAKE_DEADLINE = 10.0
QUIET = 3.0
IDLE = 15.0
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
BODY = b"<!doctype html><title>exitvoice recorder</title><p>recorded</p>\n"


class Closed(Exception):
    """The peer closed the TCP connection or sent something that ends the capture."""


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise Closed(f"eof after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def read_client_hello(sock: socket.socket) -> bytes:
    """Reads whole TLS records (RFC 8446 section 5.1) until the first handshake message is complete."""
    raw = b""
    hs = b""
    while True:
        head = recv_exact(sock, 5)
        ctype, _ver, length = struct.unpack("!BHH", head)
        if ctype != 22:
            raise Closed(f"record type {ctype} is not handshake")
        if len(raw) + 5 + length > HELLO_CAP:
            raise Closed("ClientHello over the 64 KiB cap")
        body = recv_exact(sock, length)
        raw += head + body
        hs += body
        if len(hs) >= 4:
            if hs[0] != 1:
                raise Closed(f"handshake type {hs[0]} is not ClientHello")
            need = 4 + int.from_bytes(hs[1:4], "big")
            if len(hs) >= need:
                return raw


def parse_hello_min(raw: bytes) -> dict:
    """Minimal ClientHello walk for SNI and the ALPN list (RFC 8446 section 4.1.2, RFC 6066, RFC 7301)."""
    hs = b""
    i = 0
    while i + 5 <= len(raw):
        length = int.from_bytes(raw[i + 3 : i + 5], "big")
        hs += raw[i + 5 : i + 5 + length]
        i += 5 + length
    out: dict = {"sni": None, "alpn_offered": []}
    try:
        b = hs[4 : 4 + int.from_bytes(hs[1:4], "big")]
        p = 2 + 32
        p += 1 + b[p]
        p += 2 + int.from_bytes(b[p : p + 2], "big")
        p += 1 + b[p]
        if p + 2 > len(b):
            return out
        end = p + 2 + int.from_bytes(b[p : p + 2], "big")
        p += 2
        while p + 4 <= end:
            et = int.from_bytes(b[p : p + 2], "big")
            el = int.from_bytes(b[p + 2 : p + 4], "big")
            ed = b[p + 4 : p + 4 + el]
            p += 4 + el
            if et == 0 and len(ed) >= 5 and ed[2] == 0:
                n = int.from_bytes(ed[3:5], "big")
                out["sni"] = ed[5 : 5 + n].decode("ascii", "replace")
            elif et == 16 and len(ed) >= 2:
                q = 2
                while q < len(ed):
                    n = ed[q]
                    out["alpn_offered"].append(ed[q + 1 : q + 1 + n].decode("ascii", "replace"))
                    q += 1 + n
    except IndexError:
        out["parse_error"] = "truncated ClientHello"
    return out


def h2_frames_end(buf: bytes) -> int:
    """Offset just after the last complete HTTP/2 frame (RFC 9113 section 4.1) after the preface."""
    p = len(H2_PREFACE)
    while p + 9 <= len(buf):
        n = int.from_bytes(buf[p : p + 3], "big")
        if p + 9 + n > len(buf):
            break
        p += 9 + n
    return min(p, len(buf))


class Conn:
    """One recorded connection: TLS over a MemoryBIO pair, the capture, then serving."""

    def __init__(self, srv: "Recorder", sock: socket.socket, peer, conn_id: str):
        self.srv = srv
        self.sock = sock
        self.peer = peer
        self.id = conn_id
        self.inc = ssl.MemoryBIO()
        self.outg = ssl.MemoryBIO()
        self.tls = srv.ctx.wrap_bio(self.inc, self.outg, server_side=True)
        self.meta: dict = {}
        self.written = False

    def flush(self) -> None:
        data = self.outg.read()
        if data:
            self.sock.sendall(data)

    def pump(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            self.inc.write_eof()
            raise Closed("eof")
        self.inc.write(data)

    def read_plain(self, timeout: float) -> bytes:
        """Next decrypted bytes; b'' on clean close; raises socket.timeout after `timeout`."""
        self.sock.settimeout(timeout)
        while True:
            try:
                return self.tls.read(65536)
            except ssl.SSLWantReadError:
                self.flush()
                try:
                    self.pump()
                except Closed:
                    return b""
            except ssl.SSLZeroReturnError:
                return b""

    def write_plain(self, data: bytes) -> None:
        self.tls.write(data)
        self.flush()

    def write_files(self, hello: bytes, prefix: bytes, extra: dict) -> None:
        if self.written:
            return
        self.written = True
        out = self.srv.out
        with open(os.path.join(out, f"{self.id}.hello.bin"), "wb") as f:
            f.write(hello)
        with open(os.path.join(out, f"{self.id}.prefix.bin"), "wb") as f:
            f.write(prefix)
        self.meta.update(extra)
        self.meta["hello_len"] = len(hello)
        self.meta["prefix_len"] = len(prefix)
        with open(os.path.join(out, f"{self.id}.json.tmp"), "w") as f:
            json.dump(self.meta, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(os.path.join(out, f"{self.id}.json.tmp"), os.path.join(out, f"{self.id}.json"))
        print(f"record: {self.id} {self.meta.get('spoken')} request_complete="
              f"{self.meta.get('request_complete')} prefix={len(prefix)}", file=sys.stderr, flush=True)

    def run(self) -> None:
        self.sock.settimeout(HANDSHAKE_DEADLINE)
        try:
            hello = read_client_hello(self.sock)
        except (Closed, OSError) as e:
            print(f"record: {self.id} no ClientHello: {e}", file=sys.stderr, flush=True)
            return
        self.meta = {
            "conn_id": self.id,
            "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            "peer": f"{self.peer[0]}:{self.peer[1]}",
            "recorder": "tests/tools/record.py",
            "recorder_runtime": {"python": sys.version.split()[0], "openssl": ssl.OPENSSL_VERSION,
                                 "h2": h2.__version__},
            **parse_hello_min(hello),
        }
        self.inc.write(hello)
        try:
            self.handshake()
        except (ssl.SSLError, Closed, OSError) as e:
            self.write_files(hello, b"", {"handshake_error": str(e), "request_complete": False,
                                          "spoken": None, "alpn_negotiated": None})
            return
        self.meta["alpn_negotiated"] = self.tls.selected_alpn_protocol()
        self.meta["tls_version"] = self.tls.version()
        self.meta["cipher"] = self.tls.cipher()[0]
        try:
            self.capture_and_serve(hello)
        except (ssl.SSLError, OSError, Closed, h2.exceptions.ProtocolError) as e:
            self.meta["serve_error"] = f"{type(e).__name__}: {e}"
        finally:
            if not self.written:
                self.write_files(hello, b"", {"request_complete": False, "spoken": None})

    def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                self.flush()
                return
            except ssl.SSLWantReadError:
                self.flush()
                self.pump()

    def capture_and_serve(self, hello: bytes) -> None:
        buf = b""
        spoken = None
        h2c = None
        done = False
        while True:
            timeout = QUIET if not done else IDLE
            try:
                data = self.read_plain(timeout)
            except (socket.timeout, TimeoutError):
                if not done:
                    self.write_files(hello, buf, {"request_complete": False, "spoken": spoken,
                                                  "end": "quiet period"})
                    done = True
                    continue
                return
            if not data:
                if not done:
                    self.write_files(hello, buf, {"request_complete": False, "spoken": spoken,
                                                  "end": "client closed"})
                return
            if not done:
                buf += data
                if spoken is None:
                    k = min(len(buf), len(H2_PREFACE))
                    if buf[:k] == H2_PREFACE[:k]:
                        if k == len(H2_PREFACE):
                            spoken = "h2"
                    elif b"\r\n" in buf:
                        ver = buf.split(b"\r\n", 1)[0].rsplit(b" ", 1)[-1]
                        spoken = ver.decode("latin-1").lower() if ver.startswith(b"HTTP/1.") else "unknown"
                if spoken == "h2" and h2c is None:
                    h2c = h2.connection.H2Connection(
                        h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
                    h2c.initiate_connection()
                    events = h2c.receive_data(buf)
                    done = self.h2_events(h2c, events, hello, buf) or done
                elif spoken == "h2":
                    events = h2c.receive_data(data)
                    done = self.h2_events(h2c, events, hello, buf) or done
                elif spoken not in (None, "unknown") and b"\r\n\r\n" in buf:
                    head = buf.split(b"\r\n\r\n", 1)[0]
                    line = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
                    end = buf.index(b"\r\n\r\n") + 4
                    self.write_files(hello, buf[:end], {
                        "request_complete": True, "spoken": spoken, "end": "request complete",
                        "first_request": {"method": line[0], "path": line[1] if len(line) > 1 else None}})
                    done = True
                    rest = buf[end:]
                    if self.h1_answer(head):
                        return
                    buf = rest
                if len(buf) >= PREFIX_CAP and not done:
                    self.write_files(hello, buf[:PREFIX_CAP], {"request_complete": False,
                                                                "spoken": spoken, "end": "cap"})
                    done = True
            else:
                if spoken == "h2" and h2c is not None:
                    self.h2_events(h2c, h2c.receive_data(data), hello, buf)
                elif spoken not in (None, "unknown"):
                    buf += data
                    while b"\r\n\r\n" in buf:
                        head, buf = buf.split(b"\r\n\r\n", 1)
                        if self.h1_answer(head):
                            return

    def h1_answer(self, head: bytes) -> bool:
        """Answers one HTTP/1.x request; True when the connection must close (RFC 9112 section 9.6)."""
        lines = head.split(b"\r\n")
        close = lines[0].endswith(b"HTTP/1.0") or any(
            l.lower().replace(b" ", b"") == b"connection:close" for l in lines[1:])
        self.write_plain(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
                         + str(len(BODY)).encode() + b"\r\n"
                         + (b"Connection: close\r\n" if close else b"") + b"\r\n" + BODY)
        if close:
            try:
                self.tls.unwrap()
            except (ssl.SSLWantReadError, ssl.SSLError):
                pass
            self.flush()
        return close

    def h2_events(self, h2c, events, hello: bytes, buf: bytes) -> bool:
        """Answers every request; writes the capture when the first request arrives."""
        first = False
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                if not self.written:
                    hdr = dict(ev.headers)
                    self.write_files(hello, buf[: h2_frames_end(buf)], {
                        "request_complete": True, "spoken": "h2", "end": "request complete",
                        "first_request": {"method": hdr.get(":method"), "path": hdr.get(":path"),
                                          "stream_id": ev.stream_id}})
                    first = True
                h2c.send_headers(ev.stream_id, [(":status", "200"), ("content-type", "text/html"),
                                                ("content-length", str(len(BODY)))])
                h2c.send_data(ev.stream_id, BODY, end_stream=True)
            elif isinstance(ev, h2.events.DataReceived):
                h2c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        out = h2c.data_to_send()
        if out:
            self.write_plain(out)
        return first


class Recorder:
    def __init__(self, args):
        self.out = args.out
        os.makedirs(self.out, exist_ok=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        if args.keylog:
            ctx.keylog_filename = args.keylog
        self.ctx = ctx
        self.n = 0
        self.lock = threading.Lock()
        self.prefix = args.prefix

    def serve(self, port: int, ready_file: str | None) -> None:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", port))
        ls.listen(64)
        if ready_file:
            with open(ready_file, "w") as f:
                f.write(f"{ls.getsockname()[1]}\n")
        print(f"record: listening on 127.0.0.1:{ls.getsockname()[1]}, writing {self.out}",
              file=sys.stderr, flush=True)
        while True:
            s, peer = ls.accept()
            with self.lock:
                self.n += 1
                cid = f"{self.prefix}{self.n:04d}"
            threading.Thread(target=self.handle, args=(s, peer, cid), daemon=True).start()

    def handle(self, s, peer, cid):
        try:
            Conn(self, s, peer, cid).run()
        except Exception as e:  # keep the recorder alive whatever one connection does
            print(f"record: {cid} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            try:
                s.close()
            except OSError:
                pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True, help="listen on 127.0.0.1:PORT (0 = any)")
    ap.add_argument("--cert", required=True, help="PEM certificate chain")
    ap.add_argument("--key", required=True, help="PEM private key")
    ap.add_argument("--out", required=True, help="directory for <conn-id>.{hello.bin,prefix.bin,json}")
    ap.add_argument("--keylog", help="NSS key log file for tshark")
    ap.add_argument("--prefix", default="conn-", help="conn-id prefix")
    ap.add_argument("--ready-file", help="write the bound port here once listening")
    args = ap.parse_args()
    Recorder(args).serve(args.port, args.ready_file)


if __name__ == "__main__":
    main()
