#!/usr/bin/env bash
# bench/profile.sh: where `exitvoice serve` spends its time under one of scripts/bench.sh's loads.
#
# Usage: [SERVER=baseline|floor] bench/profile.sh TOOL TEST [PATH]
#   TOOL  perf       `perf record -e cpu-clock` (a software clock: works where the hardware
#                    counters do not, e.g. in a VM) on the running server; shares of CPU time
#         groups     the same with DWARF call graphs, each sample put in one part of the server
#                    (TLS handshake, hyper, analysis, store, …) by bench/perf_groups.py; compare
#                    two servers by their shares, or by samples per handshake sample
#         callgrind  the server under `valgrind --tool=callgrind` (about 50× slower, so the load is
#                    small); shares of instructions executed
#   TEST  a (new TLS connection per request over h2), b (h2 keep-alive, 10 × 10 streams) or
#         c (HTTP/1.1 keep-alive, 10 connections)
#   PATH  the exitvoice path loaded (default /api/clean)
#   N_A, N_B  load sizes (N_B for b and c): for callgrind 200 new connections and 1,000 keep-alive requests by
#             default (larger ones amortise what the first batches prepare: each pooled SQLite
#             connection prepares and caches each multi-row INSERT length once); for perf and
#             groups 2,000 and 10,000
#   CALLGRIND_ARGS  more valgrind options for callgrind, e.g. `--cache-sim=yes` (cache misses)
#   SERVER=baseline profiles the bare rustls + hyper echo (bench/baseline) under the same load,
#                   on exitvoice's certificate: callgrind's instruction counts per connection of
#                   the two, unlike CPU time, do not move with the machine's load
#   SERVER=floor    profiles floor-echo --upto store (bench/floor: the baseline plus the least of
#                   exitvoice's work) the same way; its path is always /api/clean
# Uses the release binary already built by scripts/bench.sh (debug = 1 keeps the symbols). Prints
# the top symbols by self share and keeps the data in target/bench/profile-TOOL-TEST-*/.
# Server on CPU 0, h2load on CPU 1, loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; exit 2; }
TOOL=$1 TEST=$2 URL_PATH=${3:-/api/clean}
EV=${CARGO_TARGET_DIR:-target}/release/exitvoice
[ -x "$EV" ] || { echo "profile: build first (scripts/bench.sh or cargo build --release)" >&2; exit 1; }
OUT=${CARGO_TARGET_DIR:-target}/bench/profile-$TOOL-$TEST-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"

case $TOOL in
  perf | groups) WRAP=() N_A=${N_A:-2000} N_B=${N_B:-10000} ;;
  callgrind)
    # Instrumentation starts with the load: the start-up (aws-lc seeding its entropy, the
    # certificate, the schema) is not in the figures.
    # shellcheck disable=SC2206 # CALLGRIND_ARGS is split into words on purpose
    WRAP=(valgrind --tool=callgrind --instr-atstart=no ${CALLGRIND_ARGS:-} "--callgrind-out-file=$OUT/callgrind.out")
    N_A=${N_A:-200} N_B=${N_B:-1000}
    ;;
  *) echo "profile: TOOL is perf, groups or callgrind" >&2; exit 2 ;;
esac

SERVE=("$EV" serve --listen 127.0.0.1:0 --db "$OUT/exitvoice.db"
  --per-ip-rate 0 --per-ip-connections 100000 --max-connections 100000 --penalty-strikes 0)
READY='certificate pin'
if [ "${SERVER:-exitvoice}" != exitvoice ]; then
  # exitvoice makes the self-signed certificate; the baseline serves it.
  "$EV" serve --listen 127.0.0.1:0 --db "$OUT/cert.db" > "$OUT/cert.log" 2>&1 &
  MAKER=$!
  for ((i = 0; i < 600; i++)); do [ -s "$OUT/cert.db.key.pem" ] && break; sleep 0.1; done
  kill -TERM "$MAKER"; wait "$MAKER" || true
  SERVE=("$(dirname "$EV")/$SERVER-echo" --listen 127.0.0.1:0
    --cert "$OUT/cert.db.cert.pem" --key "$OUT/cert.db.key.pem")
  [ "$SERVER" = floor ] && SERVE+=(--db "$OUT/floor.db" --upto store)
  READY='listening on'
fi
taskset -c 0 "${WRAP[@]}" "${SERVE[@]}" > "$OUT/server.log" 2> "$OUT/server.err" &
SERVER=$!
trap 'kill -TERM $SERVER 2> /dev/null || true' EXIT
for ((i = 0; i < 600; i++)); do
  grep -q "$READY" "$OUT/server.log" "$OUT/server.err" 2> /dev/null && break
  sleep 0.1
done
ADDR=$(sed -n 's|.*listening on https://\([^ ]*\).*|\1|p' "$OUT/server.log" "$OUT/server.err" | head -n 1)
[ -n "$ADDR" ] || { cat "$OUT/server.err" >&2; exit 1; }
URL=https://$ADDR$URL_PATH

load() {
  case $TEST in
    a) for ((b = 0; b < N_A / 100; b++)); do taskset -c 1 h2load -n 100 -c 100 -m 1 "$URL"; done ;;
    b) taskset -c 1 h2load -n "$N_B" -c 10 -m 10 "$URL" ;;
    c) taskset -c 1 h2load --h1 -n "$N_B" -c 10 "$URL" ;;
  esac > "$OUT/h2load.txt" 2>&1
}

taskset -c 1 h2load -n 200 -c 10 -m 10 "$URL" > /dev/null 2>&1 # warm-up
if [ "$TOOL" != callgrind ]; then
  RECORD=(-F 2000)
  # 32 KiB of stack per sample: deep enough for tokio's and rustls's frames.
  [ "$TOOL" = groups ] && RECORD=(-F 1000 --call-graph dwarf,32768)
  perf record -e cpu-clock "${RECORD[@]}" -p "$SERVER" -o "$OUT/perf.data" 2> "$OUT/perf.err" &
  PERF=$!
  sleep 0.5
  load
  kill -INT "$PERF"
  wait "$PERF" || true
  kill -TERM "$SERVER"
  wait "$SERVER" || true
  if [ "$TOOL" = groups ]; then
    perf script -i "$OUT/perf.data" 2> /dev/null | bench/perf_groups.py --leaves 8 |
      tee "$OUT/groups.txt"
  else
    for sort in dso symbol; do
      perf report -i "$OUT/perf.data" --no-children --sort "$sort" --stdio 2> /dev/null |
        grep -E '^ +[0-9.]+%' | sed 's/[ -]*$//' | head -n 25 | tee "$OUT/top-$sort.txt" || true
    done
  fi
else
  callgrind_control -i on "$SERVER" > /dev/null
  load
  kill -TERM "$SERVER"
  wait "$SERVER" || true # callgrind writes its output when the server exits
  callgrind_annotate --inclusive=no "$OUT/callgrind.out" 2> /dev/null |
    grep -E '^ *[0-9,]+ \(' | head -n 25 | tee "$OUT/top-symbol.txt" || true
  total=$(callgrind_annotate "$OUT/callgrind.out" 2> /dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
  answered=$(awk '/^status codes:/ { ok += $3 } END { print ok + 0 }' "$OUT/h2load.txt")
  echo "profile: ${total:-?} instructions, $((${total:-0} / (answered > 0 ? answered : 1))) per answered request" >&2
fi
trap - EXIT
echo "profile: $(grep -c '^status codes' "$OUT/h2load.txt") h2load run(s)," \
  "$(awk '/^status codes:/ { ok += $3 } END { print ok + 0 }' "$OUT/h2load.txt") answered" >&2
echo "profile: data in $OUT" >&2
