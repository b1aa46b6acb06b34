#!/usr/bin/env bash
# Records captures/ with the real clients installed on this machine (see captures/README.md).
#
#   scripts/record-captures.sh                 # every client
#   scripts/record-captures.sh curl-h2 nghttp  # only these
#
# For each client: starts tshark on lo (tcp port $PORT), runs the client against
# https://echo.exitvoice.test:$PORT/ (served by tests/tools/record.py) until two runs each gave a
# connection that carried a complete request, stops tshark, embeds the TLS secrets of that
# client's connections into the pcapng (editcap --inject-secrets), copies the two connections'
# files to captures/<client>/conn{1,2}.*, writes the provenance into captures/<client>/capture.json
# and lets tests/tools/expect.py add the independently derived expected values.
# Needs root (tshark on lo, /etc/hosts, Firefox policy): run scripts/install-test-deps.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PORT=${PORT:-18650}
HOST=echo.exitvoice.test
URL="https://$HOST:$PORT/"
CA=$ROOT/.tools/certs/ca.pem
PY=$ROOT/.tools/venv/bin/python
OUT=$ROOT/captures
if [ $# -gt 0 ]; then CLIENTS=("$@"); else mapfile -t CLIENTS < <(tests/clients/run-client.sh --list); fi

[ -x "$PY" ] && [ -s "$CA" ] || { echo "run scripts/install-test-deps.sh first" >&2; exit 1; }
WORK=$(mktemp -d /tmp/record-captures.XXXXXX)
REC=$WORK/rec
KEYLOG=$WORK/keys.log
REC_PID=
TSHARK_PID=
cleanup() {
  [ -n "$TSHARK_PID" ] && kill "$TSHARK_PID" 2>/dev/null || true
  [ -n "$REC_PID" ] && kill "$REC_PID" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT

"$PY" tests/tools/record.py --port "$PORT" --cert .tools/certs/leaf-chain.pem \
  --key .tools/certs/leaf.key --out "$REC" --keylog "$KEYLOG" --ready-file "$WORK/ready" \
  2> "$WORK/recorder.log" &
REC_PID=$!
for _ in $(seq 50); do [ -s "$WORK/ready" ] && break; sleep 0.1; done
[ -s "$WORK/ready" ] || { cat "$WORK/recorder.log" >&2; exit 1; }

RUN=tests/clients/run-client.sh
# --- record ----------------------------------------------------------------------------------------
for name in "${CLIENTS[@]}"; do
  version=$($RUN --version "$name")
  echo "== $name: $version"
  pcap=$WORK/$name.pcapng
  tshark -i lo -f "tcp port $PORT" -w "$pcap" -q 2> "$WORK/$name.tshark.log" &
  TSHARK_PID=$!
  for _ in $(seq 100); do grep -q 'Capturing on' "$WORK/$name.tshark.log" && break; sleep 0.1; done
  sleep 0.5
  picked=()
  all=()
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for attempt in 1 2 3 4 5; do
    [ ${#picked[@]} -ge 2 ] && break
    before=$(ls "$REC"/*.json 2>/dev/null | sort || true)
    if ! $RUN "$name" "$URL" > "$WORK/$name.run$attempt.out" 2>&1; then
      echo "   run $attempt: client exited non-zero (see below)"; tail -3 "$WORK/$name.run$attempt.out"
    fi
    sleep 1.5
    new=$(comm -13 <(echo "$before") <(ls "$REC"/*.json 2>/dev/null | sort))
    first=
    for j in $new; do
      id=$(basename "$j" .json)
      all+=("$id")
      if [ -z "$first" ] && "$PY" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["request_complete"] else 1)' "$j"; then
        first=$id
      fi
    done
    echo "   run $attempt: connections [$(echo $new | xargs -n1 basename 2>/dev/null | sed 's/.json//' | xargs)] with request: ${first:-none}"
    [ -n "$first" ] && picked+=("$first")
  done
  sleep 0.5
  kill -INT "$TSHARK_PID"; wait "$TSHARK_PID" 2>/dev/null || true; TSHARK_PID=
  if [ ${#picked[@]} -lt 2 ]; then
    echo "   FAILED: $name gave ${#picked[@]} connection(s) with a request" >&2
    continue
  fi
  dest=$OUT/$name
  rm -rf "$dest"; mkdir -p "$dest"
  for i in 1 2; do
    id=${picked[$((i - 1))]}
    cp "$REC/$id.hello.bin" "$dest/conn$i.hello.bin"
    cp "$REC/$id.prefix.bin" "$dest/conn$i.prefix.bin"
    cp "$REC/$id.json" "$dest/conn$i.json"
  done
  # Only this client's secrets go into its pcapng (matched by ClientHello random).
  "$PY" - "$KEYLOG" "$WORK/$name.keys" "${all[@]/#/$REC/}" <<'PYEOF'
import sys
keylog, out, conns = sys.argv[1], sys.argv[2], sys.argv[3:]
randoms = set()
for c in conns:
    raw = open(c + ".hello.bin", "rb").read()
    randoms.add(raw[11:43].hex())
with open(out, "w") as f:
    for line in open(keylog):
        parts = line.split()
        if len(parts) == 3 and parts[1].lower() in randoms:
            f.write(line)
PYEOF
  editcap --inject-secrets "tls,$WORK/$name.keys" "$pcap" "$dest/capture.pcapng"
  cmd=$($RUN --command "$name" "$URL")
  cmd=${cmd//$ROOT\//}
  cmd=${cmd//$CA/.tools\/certs\/ca.pem}
  "$PY" - "$dest/capture.json" "$name" "$version" "$cmd" "$date" "$PORT" <<'PYEOF'
import json, sys
path, name, version, cmd, date, port = sys.argv[1:]
doc = {
    "client": name,
    "version": version,
    "command": cmd,
    "run_with": f"tests/clients/run-client.sh {name} URL",
    "date": date,
    "url": f"https://echo.exitvoice.test:{port}/",
    "recorder": "tests/tools/record.py (scripts/record-captures.sh)",
    "pcapng": "capture.pcapng (tshark -i lo; TLS secrets embedded with editcap --inject-secrets)",
    "connections": [{"name": f"conn{i}", "hello": f"conn{i}.hello.bin",
                     "prefix": f"conn{i}.prefix.bin", "recorder_meta": f"conn{i}.json"} for i in (1, 2)],
}
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
PYEOF
  "$PY" tests/tools/expect.py "$dest"
  echo "   -> $dest"
done
echo "recorder log: $WORK/recorder.log"
