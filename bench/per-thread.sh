#!/usr/bin/env bash
# bench/per-thread.sh: CPU per request of each of a server's threads (the runtime's workers,
# SQLite's), for `exitvoice serve`, `floor-echo --upto store` and optionally a second exitvoice
# build, each alone on the machine, round after round in turn.
#
# Usage: bench/per-thread.sh [--rounds N] [--requests N] [--h1] [--compare BIN] [--debug]
#   --rounds N     rounds; each runs every server once (default 3)
#   --requests N   requests per run (default 300000)
#   --h1           HTTP/1.1 keep-alive (`h2load --h1 -c 10`) instead of h2 (`-c 10 -m 10`)
#   --compare BIN  also runs this exitvoice binary, as `compare`
#   --debug        the dev binaries (target/debug, as `scripts/bench.sh --debug` builds them):
#                  checks the harness, the figures mean nothing
#   KEEP=1         keeps the runs' directories (each server's log and database) in the
#                  temporary directory named at the end
#
# Each run starts the server on a fresh database pinned to CPU 0, loads `/api/clean` with h2load
# pinned to CPU 1, waits 1.5 s for the writer to commit, and reads every thread's utime+stime
# from /proc/PID/task/*/stat before and after. Threads are summed by name. Uses the release
# binaries scripts/bench.sh builds; fails when a request fails or a server's threads used no
# CPU. Besides the side-by-side run of scripts/bench.sh, which
# judges whole processes, this says which thread a difference is in.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=3 N=300000 H1='' COMPARE='' PROFILE=release
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --requests) N=$2; shift 2 ;;
    --h1) H1=1; shift ;;
    --compare) COMPARE=$2; shift 2 ;;
    --debug) PROFILE=debug; shift ;;
    *) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; exit 2 ;;
  esac
done
for v in ROUNDS N; do
  if ! [[ ${!v} =~ ^[0-9]+$ ]] || [ "${!v}" -eq 0 ]; then
    echo "per-thread: ${v,,} must be a positive whole number" >&2
    exit 2
  fi
done
# Absolute paths: each server runs in a directory of its own.
BIN=$(realpath -m "${CARGO_TARGET_DIR:-target}/$PROFILE")
[ -z "$COMPARE" ] || COMPARE=$(realpath -m "$COMPARE")
for bin in "$BIN/exitvoice" "$BIN/floor-echo" ${COMPARE:+"$COMPARE"}; do
  [ -x "$bin" ] || { echo "per-thread: $bin is not built (scripts/bench.sh builds it)" >&2; exit 1; }
done
command -v h2load > /dev/null || { echo "per-thread: h2load is missing (nghttp2-client)" >&2; exit 1; }
LOAD=(-c 10 -m 10)
[ -z "$H1" ] || LOAD=(--h1 -c 10)

WORK=$(mktemp -d)
SERVER=
cleanup() {
  [ -z "$SERVER" ] || kill "$SERVER" 2> /dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "per-thread: runs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# Ticks of each thread name of process $1, one "name ticks" line each.
ticks() {
  local task fields
  for task in /proc/"$1"/task/*; do
    read -ra fields < <(sed 's/.*) //' "$task/stat")
    # utime and stime: fields 14 and 15 of stat, 12 and 13 after the command name.
    printf '%s %d\n' "$(tr ' ' _ < "$task/comm")" $((fields[11] + fields[12]))
  done | awk '{t[$1] += $2} END {for (k in t) print k, t[k]}' | sort
}

# One run: target name, then the server's command. Prints "target thread µs/request" lines.
run() {
  local name=$1 dir port before after
  shift
  dir=$WORK/$name-$RANDOM
  mkdir -p "$dir"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  (cd "$dir" && exec taskset -c 0 "$@" --listen "127.0.0.1:$port" > log 2>&1) &
  SERVER=$!
  for _ in $(seq 300); do
    curl -sk -o /dev/null "https://127.0.0.1:$port/" && break
    sleep 0.1
  done
  before=$(ticks "$SERVER")
  taskset -c 1 h2load "${LOAD[@]}" -n "$N" "https://127.0.0.1:$port/api/clean" > "$dir/h2load" 2>&1
  grep -q "$N succeeded" "$dir/h2load" || { echo "per-thread: $name: not every request succeeded" >&2; cat "$dir/h2load" >&2; exit 1; }
  sleep 1.5
  after=$(ticks "$SERVER")
  kill "$SERVER"
  wait "$SERVER" 2> /dev/null || true
  SERVER=
  local lines
  lines=$(join <(echo "$before") <(echo "$after") |
    awk -v n="$N" -v name="$name" -v hz="$(getconf CLK_TCK)" \
      '$3 > $2 {printf "%s %s %.2f\n", name, $1, ($3 - $2) * 1e6 / hz / n}')
  [ -n "$lines" ] || { echo "per-thread: $name: no thread used CPU under the load" >&2; exit 1; }
  echo "$lines"
}

EV_ARGS=(serve --db e.db --per-ip-rate 0 --per-ip-connections 100000 --max-connections 100000 --penalty-strikes 0)
results=$WORK/results
for ((round = 1; round <= ROUNDS; round++)); do
  run exitvoice "$BIN/exitvoice" "${EV_ARGS[@]}" >> "$results"
  # The floor serves the certificate the first exitvoice run made.
  certs=("$WORK"/exitvoice-*/e.db.cert.pem)
  cert=${certs[0]}
  [ -z "$COMPARE" ] || run compare "$COMPARE" "${EV_ARGS[@]}" >> "$results"
  run floor "$BIN/floor-echo" --cert "$cert" --key "${cert%.cert.pem}.key.pem" --db f.db --upto store >> "$results"
  echo "per-thread: round $round/$ROUNDS done" >&2
done

echo "µs of CPU per request, by thread (each round's run), $N requests of /api/clean, $([ -n "$H1" ] && echo HTTP/1.1 || echo h2) keep-alive:"
echo
echo "| target | thread | runs | median |"
echo "|---|---|---|---|"
python3 - "$results" << 'EOF'
import statistics
import sys

runs = {}
for line in open(sys.argv[1]):
    target, thread, us = line.split()
    runs.setdefault((target, thread), []).append(float(us))
for (target, thread), values in sorted(runs.items()):
    listed = ", ".join(f"{v:.2f}" for v in values)
    print(f"| {target} | {thread} | {listed} | {statistics.median(values):.2f} |")
EOF
