#!/usr/bin/env bash
# scripts/bench-broker.sh: lease + release cycles per second and acquire latency of one
# `exitvoice broker`, with 64 concurrent clients (bench/brokerload), on loopback.
#
# Usage: scripts/bench-broker.sh [OPTIONS]
#
# Builds the release binaries (`exitvoice`, `brokerload`), then for each store and each pool
# size of --pools:
#   1. `brokerload seed`: an exits file of N plain exits and a labels snapshot admitting each as
#      identity, in a fresh database (SQLite file; or a fresh database of a throwaway PostgreSQL
#      cluster with default settings, durable commits; or the same with
#      `synchronous_commit = off`, set on that database only);
#   2. `exitvoice broker` on it, pinned to CPU 0 (PostgreSQL's server is not pinned);
#   3. on PostgreSQL, what a server that has run for a few minutes has: WAL segments to reuse
#      (24 switched through and recycled by a checkpoint; a fresh cluster stalls its commits
#      every few seconds writing a new segment), then a warm-up of 3 s of load and `ANALYZE`,
#      the statistics autovacuum gathers within a live server's first minute (a fresh database
#      has none: until then PostgreSQL keeps plans that read whole tables);
#   4. `brokerload run` pinned to CPU 1: --clients clients, each on one keep-alive connection,
#      loop acquire (class identity) then release for --seconds: the saturation rate;
#   5. the same paced at half that rate: the acquire latency a pool under steady load sees.
# Prints a markdown table (cycles/s at saturation, acquire p50/p99 at saturation and at half
# of it) and keeps it, with every log and JSON line, in --out. Exits 1 when a run completes no
# cycle, so --quick serves as a smoke check.
#
# Options
#   --pools "N ..."     pool sizes (default "100 10000")
#   --stores "S ..."    of sqlite, postgres, postgres-async (default all three)
#   --clients C         concurrent clients (default 64)
#   --seconds S         length of each run (default 10)
#   --quick             smoke preset: --pools 100 --seconds 2
#   --debug             build and run the dev profile (checks the harness; figures mean nothing)
#   --no-build          use the binaries already built
#   --out DIR           results folder (default $CARGO_TARGET_DIR or target, then
#                       bench/broker-YYYYmmdd-HHMMSS)
#
# Other work on the machine disturbs the figures: check `uptime` first (it is recorded).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; }
die() { echo "bench-broker: $*" >&2; exit 1; }
say() { echo "[bench-broker $(date +%H:%M:%S)] $*" >&2; }

POOLS="100 10000" STORES="sqlite postgres postgres-async" CLIENTS=64 SECONDS_EACH=10
PROFILE=release BUILD=1 OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) POOLS=100 SECONDS_EACH=2; shift; continue ;;
    --debug) PROFILE=debug; shift; continue ;;
    --no-build) BUILD=; shift; continue ;;
    -h | --help) usage; exit 0 ;;
  esac
  [ $# -ge 2 ] || die "$1 needs a value (see --help)"
  case $1 in
    --pools) POOLS=$2 ;;
    --stores) STORES=$2 ;;
    --clients) CLIENTS=$2 ;;
    --seconds) SECONDS_EACH=$2 ;;
    --out) OUT=$2 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift 2
done

TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/$PROFILE
OUT=${OUT:-$TARGET/bench/broker-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
if [ -n "$BUILD" ]; then
  flag=--release
  [ "$PROFILE" = debug ] && flag=
  say "building ($PROFILE)"
  cargo build $flag -p exitvoice -p exitvoice-brokerload --bin exitvoice --bin brokerload >&2
fi
[ -x "$BIN/exitvoice" ] && [ -x "$BIN/brokerload" ] || die "no binaries in $BIN (drop --no-build)"

PIDS=()
. scripts/pg-cluster.sh
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop
}
trap cleanup EXIT
case " $STORES " in *" postgres"*) pg_start || die "no PostgreSQL cluster"; say "PostgreSQL on 127.0.0.1:$PGPORT" ;; esac

export EXITVOICE_BROKER_TOKEN=bench-broker-token-$RANDOM$RANDOM
TABLE=$OUT/results.md
{
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $CLIENTS clients, ${SECONDS_EACH} s per run, profile $PROFILE"
  echo
  echo "| store | exits | cycles/s (saturation) | acquire p50 / p99 ms (saturation) | acquire p50 / p99 ms (half rate) | other answers |"
  echo "|---|---:|---:|---:|---:|---:|"
} >"$TABLE"

field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<<"$2"; }
acquire() { sed -n "s/.*\"acquire_ms\":{[^}]*\"$1\":\([0-9.]*\).*/\1/p" <<<"$2"; }

for store in $STORES; do
  for n in $POOLS; do
    dir=$OUT/$store-$n
    mkdir -p "$dir"
    case $store in
      sqlite) DB=$dir/broker.db ;;
      postgres) DB=$(pg_createdb "broker_$n") ;;
      postgres-async)
        DB=$(pg_createdb "broker_async_$n")
        psql -q "$DB" -c "ALTER DATABASE broker_async_$n SET synchronous_commit = off" ;;
      *) die "unknown store $store" ;;
    esac
    say "$store, $n exits: seed"
    "$BIN/brokerload" seed --database "$DB" --exits "$n" --out "$dir/exits.toml"
    taskset -c 0 "$BIN/exitvoice" broker --exits "$dir/exits.toml" --database "$DB" \
      --listen 127.0.0.1:0 --instance bench >"$dir/broker.out" 2>"$dir/broker.log" &
    broker=$!
    PIDS+=("$broker")
    for _ in $(seq 200); do grep -q "listening on" "$dir/broker.out" 2>/dev/null && break; sleep 0.1; done
    URL=$(sed -n 's/.*listening on \(http:\/\/[^/]*\)\/v1\/leases.*/\1/p' "$dir/broker.out")
    [ -n "$URL" ] || die "the broker did not start (see $dir/broker.log)"
    if [ "$store" != sqlite ]; then
      say "$store, $n exits: WAL segments to reuse, warm-up, then ANALYZE"
      pg_recycle_wal 24
      taskset -c 1 "$BIN/brokerload" run --broker "$URL" --clients "$CLIENTS" --seconds 3 >"$dir/warm-up.json"
      psql -q "$DB" -c ANALYZE
    fi
    say "$store, $n exits: saturation"
    sat=$(taskset -c 1 "$BIN/brokerload" run --broker "$URL" --clients "$CLIENTS" --seconds "$SECONDS_EACH")
    echo "$sat" >"$dir/saturation.json"
    rate=$(awk -v r="$(field cycles_per_s "$sat")" 'BEGIN { printf "%.1f", r / 2 }')
    say "$store, $n exits: half rate ($rate cycles/s)"
    half=$(taskset -c 1 "$BIN/brokerload" run --broker "$URL" --clients "$CLIENTS" --seconds "$SECONDS_EACH" --rate "$rate")
    echo "$half" >"$dir/half.json"
    kill "$broker" 2>/dev/null || true
    wait "$broker" 2>/dev/null || true
    other=$(( $(field other_answers "$sat") + $(field other_answers "$half") ))
    printf '| %s | %s | %.0f | %s / %s | %s / %s | %s |\n' "$store" "$n" "$(field cycles_per_s "$sat")" \
      "$(acquire p50 "$sat")" "$(acquire p99 "$sat")" "$(acquire p50 "$half")" "$(acquire p99 "$half")" \
      "$other" >>"$TABLE"
  done
done
cat "$TABLE"
