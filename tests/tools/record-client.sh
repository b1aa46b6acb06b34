#!/usr/bin/env bash
# Records one real client through the independent recorder and derives its expected values with
# independent tools: the one piece behind scripts/record-captures.sh (captures/) and the live
# expectations of tests/echo_clients.rs (a temporary directory).
#
#   tests/tools/record-client.sh [--port PORT] CLIENT DEST
#
# Starts tests/tools/record.py on 127.0.0.1:PORT (default 0: a free port, so several recordings
# can run side by side) and tshark on lo for that port, runs `tests/clients/run-client.sh CLIENT
# https://echo.exitvoice.test:PORT/` until two runs each gave a connection that carried a complete
# request (at most five runs), stops tshark, embeds the TLS secrets of the recorded connections
# into the pcapng (editcap --inject-secrets), and writes DEST in the format of captures/<client>/
# (captures/README.md): conn{1,2}.{hello.bin,prefix.bin,json}, capture.pcapng, capture.json with
# the provenance; tests/tools/expect.py then adds the expected values (tshark, ja4plus,
# hyperframe/hpack). DEST is replaced. Exit status 0 only when all of that succeeded.
# Needs root (tshark on lo) and scripts/install-test-deps.sh (venv, test CA, /etc/hosts).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PORT=0
if [ "${1:-}" = --port ]; then PORT=$2; shift 2; fi
[ $# -eq 2 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
name=$1 dest=$2
HOST=echo.exitvoice.test
CA=$ROOT/.tools/certs/ca.pem
PY=$ROOT/.tools/venv/bin/python
RUN=$ROOT/tests/clients/run-client.sh
[ -x "$PY" ] && [ -s "$CA" ] || { echo "run scripts/install-test-deps.sh first" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/record-client.XXXXXX")
REC=$WORK/rec
KEYLOG=$WORK/keys.log
REC_PID=
TSHARK_PID=
cleanup() {
  [ -n "$TSHARK_PID" ] && kill "$TSHARK_PID" 2>/dev/null || true
  [ -n "$REC_PID" ] && kill "$REC_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "record-client: $name: $*" >&2
  echo "--- recorder log" >&2; cat "$WORK/recorder.log" >&2 || true
  exit 1
}

version=$($RUN --version "$name")
"$PY" "$ROOT/tests/tools/record.py" --port "$PORT" --cert "$ROOT/.tools/certs/leaf-chain.pem" \
  --key "$ROOT/.tools/certs/leaf.key" --out "$REC" --keylog "$KEYLOG" --ready-file "$WORK/ready" \
  2> "$WORK/recorder.log" &
REC_PID=$!
for _ in $(seq 100); do [ -s "$WORK/ready" ] && break; sleep 0.1; done
[ -s "$WORK/ready" ] || fail "the recorder did not start"
PORT=$(cat "$WORK/ready")
URL="https://$HOST:$PORT/"

tshark -i lo -f "tcp port $PORT" -w "$WORK/capture.pcapng" -q 2> "$WORK/tshark.log" &
TSHARK_PID=$!
for _ in $(seq 100); do grep -q 'Capturing on' "$WORK/tshark.log" && break; sleep 0.1; done
grep -q 'Capturing on' "$WORK/tshark.log" || fail "tshark did not start: $(cat "$WORK/tshark.log")"
sleep 0.5

picked=()
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for attempt in 1 2 3 4 5; do
  [ ${#picked[@]} -ge 2 ] && break
  before=$(ls "$REC"/*.json 2>/dev/null | sort || true)
  if ! "$RUN" "$name" "$URL" > "$WORK/run$attempt.out" 2>&1; then
    echo "   run $attempt: client exited non-zero:" >&2; tail -3 "$WORK/run$attempt.out" >&2
  fi
  # Browsers may open a second connection that stays unused; the recorder writes its notes
  # after a quiet period or when it closes.
  sleep 1.5
  new=$(comm -13 <(echo "$before") <(ls "$REC"/*.json 2>/dev/null | sort))
  first=
  for j in $new; do
    if "$PY" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["request_complete"] else 1)' "$j"; then
      first=$(basename "$j" .json)
      break
    fi
  done
  echo "   run $attempt: connections [$(echo $new | xargs -n1 basename 2>/dev/null | sed 's/.json//' | xargs)] with request: ${first:-none}" >&2
  [ -n "$first" ] && picked+=("$first")
done
sleep 0.5
kill -INT "$TSHARK_PID"; wait "$TSHARK_PID" 2>/dev/null || true; TSHARK_PID=
[ ${#picked[@]} -ge 2 ] || fail "${#picked[@]} connection(s) with a request in five runs"

rm -rf "$dest"; mkdir -p "$dest"
for i in 1 2; do
  id=${picked[$((i - 1))]}
  cp "$REC/$id.hello.bin" "$dest/conn$i.hello.bin"
  cp "$REC/$id.prefix.bin" "$dest/conn$i.prefix.bin"
  cp "$REC/$id.json" "$dest/conn$i.json"
done
# The key log holds the secrets of this recorder's connections only: this client's.
editcap --inject-secrets "tls,$KEYLOG" "$WORK/capture.pcapng" "$dest/capture.pcapng"
cmd=$($RUN --command "$name" "$URL")
cmd=${cmd//$CA/.tools\/certs\/ca.pem}
cmd=${cmd//$ROOT\//}
"$PY" - "$dest/capture.json" "$name" "$version" "$cmd" "$date" "$URL" <<'PYEOF'
import json, sys
path, name, version, cmd, date, url = sys.argv[1:]
doc = {
    "client": name,
    "version": version,
    "command": cmd,
    "run_with": f"tests/clients/run-client.sh {name} URL",
    "date": date,
    "url": url,
    "recorder": "tests/tools/record.py (tests/tools/record-client.sh)",
    "pcapng": "capture.pcapng (tshark -i lo; TLS secrets embedded with editcap --inject-secrets)",
    "connections": [{"name": f"conn{i}", "hello": f"conn{i}.hello.bin",
                     "prefix": f"conn{i}.prefix.bin", "recorder_meta": f"conn{i}.json"} for i in (1, 2)],
}
with open(path, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
PYEOF
"$PY" "$ROOT/tests/tools/expect.py" "$dest"
