#!/usr/bin/env bash
# Regenerates the small seed corpora under fuzz/corpus/<target>/ from data already in the repo:
#   client_hello  captures/*/conn1.hello.bin (14 real clients) + the first ClientHello of each
#                 capture in protocol/tests/data/ja4/clienthellos.jsonl (FoxIO vectors,
#                 bare handshake messages, hex-decoded)
#   h2_prefix     captures/*/conn1.prefix.bin starting with the h2 preface + the python-hyper
#                 fixtures protocol/tests/data/h2/*.bin
#   h1_head       captures/*/conn1.prefix.bin starting with an HTTP/1 request line
#   pcap          the small (< 4 KiB) FoxIO pcap/pcapng files + one recorded capture with its
#                 TLS secrets block (captures/curl-h2/capture.pcapng)
#   quic_initials byte 0 (0: one datagram) + the client Initials of RFC 9001 and RFC 9369
#                 Appendix A.2 (protocol/tests/data/quic/*-client-initial.hex)
#   h3_streams    written here: a SETTINGS frame and RFC 9204 B.1's field section
#   connect_reply, socks5_reply, exits_file: written here from the RFCs and the replies of
#                 the proxies in the auditor's tests (squid, tinyproxy, dante).
# Seeds are named after their source. Idempotent; needs python3 for the jsonl vectors.
set -euo pipefail
cd "$(dirname "$0")/.."
C=fuzz/corpus
rm -rf "$C"
mkdir -p "$C"/{client_hello,h2_prefix,h1_head,pcap,quic_initials,h3_streams,connect_reply,socks5_reply,exits_file}

for dir in captures/*/; do
  client=$(basename "$dir")
  [ -f "$dir/conn1.hello.bin" ] && cp "$dir/conn1.hello.bin" "$C/client_hello/capture-$client"
  if [ -f "$dir/conn1.prefix.bin" ]; then
    if [ "$(head -c 3 "$dir/conn1.prefix.bin")" = "PRI" ]; then
      cp "$dir/conn1.prefix.bin" "$C/h2_prefix/capture-$client"
    else
      cp "$dir/conn1.prefix.bin" "$C/h1_head/capture-$client"
    fi
  fi
done
for f in protocol/tests/data/h2/*.bin; do
  cp "$f" "$C/h2_prefix/hyper-$(basename "$f" .bin)"
done

python3 - "$C/client_hello" <<'PY'
import json, os, sys
out, seen = sys.argv[1], set()
with open("protocol/tests/data/ja4/clienthellos.jsonl") as f:
    for line in f:
        v = json.loads(line)
        src = os.path.splitext(os.path.basename(v["pcap"]))[0]
        if src in seen:
            continue
        seen.add(src)
        with open(os.path.join(out, "foxio-" + src), "wb") as o:
            o.write(bytes.fromhex(v["client_hello_hex"]))
PY

for f in protocol/tests/data/ja4/pcap/*.pcap protocol/tests/data/ja4/pcap/*.pcapng; do
  [ "$(stat -c %s "$f")" -lt 4096 ] && cp "$f" "$C/pcap/foxio-$(basename "$f")"
done
[ -f captures/curl-h2/capture.pcapng ] && cp captures/curl-h2/capture.pcapng "$C/pcap/capture-curl-h2.pcapng"

# quic_initials: byte 0 = where to split into two datagrams (0: one datagram), then the RFC
# Initials.
for f in protocol/tests/data/quic/*-client-initial.hex; do
  python3 -c 'import sys; sys.stdout.buffer.write(b"\x00" + bytes.fromhex("".join(open(sys.argv[1]).read().split())))' \
    "$f" > "$C/quic_initials/$(basename "$f" .hex)"
done

# h3_streams: byte 0 = control stream length / 4, then a control stream's SETTINGS frame (Chrome's
# ids and values, a GREASE id) and a request's HEADERS frame (RFC 9204 Appendix B.1's field
# section, then a Huffman-coded :authority, RFC 7541 C.4.1).
printf '\x05\x04\x12\x01\x80\x01\x00\x00\x06\x80\x04\x00\x00\x07\x40\x64\x33\x01\x40\x7e\x05\x01\x1d\x00\x00\x51\x0b/index.html\x50\x8c\xf1\xe3\xc2\xe5\xf2\x3a\x6b\xa0\xab\x90\xf4\xff' \
  > "$C/h3_streams/chrome-settings-rfc9204-b1"

# connect_reply: byte 0 = read size (0: as asked), then the proxy's reply.
w() { printf "$2" > "$1"; }
w "$C/connect_reply/squid-200" '\x00HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x03\x00\x7a\x02'
w "$C/connect_reply/tinyproxy-200" '\x00HTTP/1.0 200 Connection established\r\nProxy-agent: tinyproxy/1.11.1\r\n\r\n'
w "$C/connect_reply/407-bytewise" '\x01HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="zoo"\r\nContent-Length: 0\r\n\r\n'
w "$C/connect_reply/tinyproxy-401" '\x03HTTP/1.0 401 Unauthorized\r\nServer: tinyproxy/1.11.1\r\nContent-Type: text/html\r\nWWW-Authenticate: Basic realm="tinyproxy"\r\nConnection: close\r\n\r\n<html></html>'
w "$C/connect_reply/502" '\x00HTTP/1.1 502 Bad Gateway\r\nVia: 1.1 squid\r\n\r\n'
w "$C/connect_reply/not-http" '\x00SSH-2.0-OpenSSH_9.2\r\n'

# socks5_reply: byte 0 bit 0 = password auth, bit 1 = name target; byte 1 = read size; then
# the proxy's side: method selection, [auth status], CONNECT reply (RFC 1928 section 6).
w "$C/socks5_reply/noauth-ipv4" '\x00\x00\x05\x00\x05\x00\x00\x01\x7f\x00\x00\x01\xc3\x50'
w "$C/socks5_reply/noauth-name-bytewise" '\x02\x01\x05\x00\x05\x00\x00\x03\x0cecho.example\x01\xbb'
w "$C/socks5_reply/auth-ipv6" '\x01\x00\x05\x02\x01\x00\x05\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x01\xbb'
w "$C/socks5_reply/auth-refused" '\x03\x00\x05\x02\x01\x01'
w "$C/socks5_reply/no-method" '\x00\x00\x05\xff'
w "$C/socks5_reply/host-unreachable" '\x00\x00\x05\x00\x05\x04\x00\x01\x00\x00\x00\x00\x00\x00'

cat > "$C/exits_file/toml" <<'TOML'
[echo]
url = "https://localhost:18443/"
spki_sha256 = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

[[exits]]
name = "squid"
url = "http://zoo:p%40ss@127.0.0.1:13128"
tags = { tier = "dc", region = "eu" }

[[exits]]
name = "gw"
url = "socks5h://cust-{session}:pw@127.0.0.1:11080"
sessions = 3
TOML
printf '# exits\nhttp://zoo:zoopass@127.0.0.1:13128\n\nsocks5h://127.0.0.1:11080\nsocks5://u:p@[::1]:1080\nhttps://proxy.example:8443\n' > "$C/exits_file/plain-list"

for t in "$C"/*/; do echo "$(basename "$t"): $(ls "$t" | wc -l) seeds, $(cat "$t"* | wc -c) bytes"; done
