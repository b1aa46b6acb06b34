#!/usr/bin/env bash
# scripts/bench-broker-redis.sh: the broker on Redis side by side with the published Redis
# broker (../seeds' `get_free_proxy` / `release_proxy`, as the Redis commands it sends), against
# one throwaway redis-server, with the same load generator (bench/brokerload) and 64 clients.
#
# Usage: scripts/bench-broker-redis.sh [OPTIONS]
#
# For each pool size of --pools and each share of it leased beforehand (--held, percent):
#   - store: the broker's store layer (`brokerload store`: acquire + release through
#     LeaseStore on Redis, no HTTP);
#   - store-cluster: the same on a Redis Cluster of 3 primaries (`redis+cluster://`; the pool
#     lives on the node that holds its slot);
#   - baseline: the published algorithm (`brokerload baseline`): SMEMBERS, shuffle, up to 20
#     EXISTS + SET NX EX; DEL to release. An acquire that gives up is a failed acquire, not a
#     cycle;
#   - http: `exitvoice broker --store redis://…` end to end (`brokerload run`).
# Each at saturation, then paced at half that rate (acquire p99 under steady load). Redis and
# the broker are pinned to CPU 0 (the cluster's nodes too), the load to CPU 1. Prints a markdown table and keeps it, with
# every JSON line, in --out.
#
# Options
#   --pools "N ..."     pool sizes (default "100 10000 100000")
#   --held "P ..."      percent of the pool leased before the run (default "10 90")
#   --clients C         concurrent clients (default 64)
#   --seconds S         length of each run (default 5)
#   --quick             smoke preset: --pools 100 --held 10 --seconds 1
#   --no-build          use the release binaries already built
#   --out DIR           results folder (default target/bench/broker-redis-YYYYmmdd-HHMMSS)
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; }
die() { echo "bench-broker-redis: $*" >&2; exit 1; }
say() { echo "[bench-broker-redis $(date +%H:%M:%S)] $*" >&2; }

POOLS="100 10000 100000" HELD="10 90" CLIENTS=64 SECONDS_EACH=5 BUILD=1 OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) POOLS=100 HELD=10 SECONDS_EACH=1; shift; continue ;;
    --no-build) BUILD=; shift; continue ;;
    -h | --help) usage; exit 0 ;;
  esac
  [ $# -ge 2 ] || die "$1 needs a value (see --help)"
  case $1 in
    --pools) POOLS=$2 ;;
    --held) HELD=$2 ;;
    --clients) CLIENTS=$2 ;;
    --seconds) SECONDS_EACH=$2 ;;
    --out) OUT=$2 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift 2
done
command -v redis-server >/dev/null || die "redis-server is missing: run scripts/install-test-deps.sh"

TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release
OUT=${OUT:-$TARGET/bench/broker-redis-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
if [ -n "$BUILD" ]; then
  say "building (release)"
  cargo build --release -p exitvoice -p exitvoice-brokerload --bin exitvoice --bin brokerload >&2
fi
[ -x "$BIN/exitvoice" ] && [ -x "$BIN/brokerload" ] || die "no binaries in $BIN (drop --no-build)"

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$OUT/redis"
taskset -c 0 redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$OUT/redis" --daemonize no >"$OUT/redis/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$PORT" ping >/dev/null || die "redis-server did not start (see $OUT/redis/redis.log)"
REDIS=redis://127.0.0.1:$PORT/
say "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on $REDIS"

# The cluster: three primaries, no replicas (the row measures the client's path to the pool's
# node; replication is the same work with one server or a cluster).
NODES=()
for i in 1 2 3; do
  node=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$OUT/cluster/$i"
  taskset -c 0 redis-server --port "$node" --bind 127.0.0.1 --save "" --appendonly no \
    --cluster-enabled yes --cluster-config-file nodes.conf --dir "$OUT/cluster/$i" \
    --daemonize no >"$OUT/cluster/$i/redis.log" 2>&1 &
  PIDS+=($!)
  NODES+=("127.0.0.1:$node")
done
for node in "${NODES[@]}"; do
  for _ in $(seq 50); do redis-cli -p "${node#*:}" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "${NODES[@]}" --cluster-replicas 0 --cluster-yes >"$OUT/cluster/create.log" 2>&1 \
  || die "the cluster did not form (see $OUT/cluster/create.log)"
for _ in $(seq 100); do
  redis-cli -p "${NODES[0]#*:}" cluster info | grep -q cluster_state:ok && break
  sleep 0.1
done
CLUSTER="redis+cluster://$(IFS=,; echo "${NODES[*]}")/"
say "a Redis Cluster of 3 primaries on $CLUSTER"

export EXITVOICE_BROKER_TOKEN=bench-broker-token-$RANDOM$RANDOM
TABLE=$OUT/results.md
{
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $CLIENTS clients, ${SECONDS_EACH} s per run"
  echo
  echo "| exits | leased | path | cycles/s (saturation) | failed acquires | acquire p50 / p99 ms (saturation) | acquire p50 / p99 ms (half rate) |"
  echo "|---:|---:|---|---:|---:|---:|---:|"
} >"$TABLE"

field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<<"$2"; }
acquire() { sed -n "s/.*\"acquire_ms\":{[^}]*\"$1\":\([0-9.]*\).*/\1/p" <<<"$2"; }

# measure NAME DIR COMMAND...: saturation, then half its rate; one table row.
measure() {
  local name=$1 dir=$2 sat half rate
  shift 2
  say "$name: saturation"
  sat=$(taskset -c 1 "$@" --clients "$CLIENTS" --seconds "$SECONDS_EACH")
  echo "$sat" >"$dir/$name-saturation.json"
  rate=$(awk -v r="$(field cycles_per_s "$sat")" 'BEGIN { printf "%.1f", r / 2 }')
  say "$name: half rate ($rate cycles/s)"
  half=$(taskset -c 1 "$@" --clients "$CLIENTS" --seconds "$SECONDS_EACH" --rate "$rate")
  echo "$half" >"$dir/$name-half.json"
  printf '| %s | %s %% | %s | %.0f | %s | %s / %s | %s / %s |\n' "$n" "$p" "$name" \
    "$(field cycles_per_s "$sat")" "$(field failed_acquires "$sat")" \
    "$(acquire p50 "$sat")" "$(acquire p99 "$sat")" "$(acquire p50 "$half")" "$(acquire p99 "$half")" \
    >>"$TABLE"
}

for n in $POOLS; do
  for p in $HELD; do
    held=$(( n * p / 100 ))
    dir=$OUT/$n-$p
    mkdir -p "$dir"
    measure store "$dir" "$BIN/brokerload" store --store "$REDIS" --units "$n" --hold "$held"
    measure store-cluster "$dir" "$BIN/brokerload" store --store "$CLUSTER" --units "$n" --hold "$held"
    measure baseline "$dir" "$BIN/brokerload" baseline --redis "$REDIS" --units "$n" --hold "$held"
    "$BIN/brokerload" seed --database "$dir/labels.db" --exits "$n" --out "$dir/exits.toml"
    taskset -c 0 "$BIN/exitvoice" broker --exits "$dir/exits.toml" --database "$dir/labels.db" \
      --store "$REDIS" --redis-pool "bench-$n-$p" --listen 127.0.0.1:0 --instance bench \
      >"$dir/broker.out" 2>"$dir/broker.log" &
    broker=$!
    PIDS+=("$broker")
    for _ in $(seq 900); do grep -q "listening on" "$dir/broker.out" 2>/dev/null && break; sleep 0.1; done
    URL=$(sed -n 's/.*listening on \(http:\/\/[^/]*\)\/v1\/leases.*/\1/p' "$dir/broker.out")
    [ -n "$URL" ] || die "the broker did not start (see $dir/broker.log)"
    [ "$held" -gt 0 ] && "$BIN/brokerload" hold --broker "$URL" --count "$held"
    measure http "$dir" "$BIN/brokerload" run --broker "$URL"
    kill "$broker" 2>/dev/null || true
    wait "$broker" 2>/dev/null || true
    redis-cli -p "$PORT" flushall >/dev/null
    for node in "${NODES[@]}"; do redis-cli -p "${node#*:}" flushall >/dev/null; done
  done
done
cat "$TABLE"
