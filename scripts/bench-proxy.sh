#!/usr/bin/env bash
# scripts/bench-proxy.sh: the broker's forward proxy on loopback, beside the exit dialled
# directly and beside HAProxy relaying the same tunnels, in one run (bench/proxyload).
#
# Usage: scripts/bench-proxy.sh [OPTIONS]
#
# Builds the release binaries (`exitvoice`, `exitsim`, `brokerload`, `proxyload`), then starts
# `exitsim serve` (--exits simulated HTTP CONNECT exits, `exit-<n>`) pinned to CPU 1,
# `brokerload seed --exitsim` (an exits file naming them and a labels snapshot admitting each,
# in a fresh SQLite database: no audit), `exitvoice broker --proxy-listen` pinned to CPU 0, and
# HAProxy in TCP mode (one thread, pinned to CPU 0, its frontend forwarding to exitsim). Every
# tunnel ends at a target inside `proxyload` (pinned to CPU 1) that sends one byte at once.
#   1. First byte: --count tunnels per path, the paths in turn, each a new connection, a CONNECT
#      and the target's first byte: directly through exitsim; through the broker's proxy with
#      a new lease per tunnel (`class-anonymous`); riding a task's lease that one keeper tunnel
#      holds live (`class-anonymous-task-…`). p50 / p99 per path and added over direct.
#   2. Relay: --bytes from the target over --streams tunnels, through the broker's proxy, then
#      through HAProxy (the client sends exitsim's CONNECT itself); MB/s and the relay's CPU
#      seconds (utime + stime, /proc/PID/stat) per GB (10^9 bytes), exitsim's beside it.
#   3. Idle: --idle tunnels open at once through the broker over --tasks tasks (one lease each,
#      `--tunnel-idle 10m`), each with its first byte read: refused tunnels, tunnels closed while
#      idle, and the broker's resident memory (VmRSS) growth per tunnel. Each tunnel takes two
#      descriptors in the broker, in exitsim and in proxyload: the count is cut to what
#      `ulimit -Hn` allows (recorded).
# Prints three markdown tables and keeps them, with every log and JSON line, in --out. Exits 1
# when a tunnel is refused or closes early, so --quick serves as a smoke check.
#
# Options
#   --count N           first-byte tunnels per path (default 2000, after 100 of warm-up)
#   --bytes B           bytes per relay (default 2000000000)
#   --streams K         tunnels carrying them (default 4)
#   --idle N            idle tunnels (default 10000, cut to the descriptor limit)
#   --tasks T           tasks the idle tunnels ride (default 100)
#   --quick             smoke preset: --count 50 --bytes 50000000 --idle 200 --tasks 10
#   --debug             build and run the dev profile (checks the harness; figures mean nothing)
#   --no-build          use the binaries already built
#   --out DIR           results folder (default $CARGO_TARGET_DIR or target, then
#                       bench/proxy-YYYYmmdd-HHMMSS)
#
# Needs haproxy, python3 and taskset. Other work on the machine disturbs the figures: check `uptime`
# first (the load average is recorded).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; }
die() { echo "bench-proxy: $*" >&2; exit 1; }
say() { echo "[bench-proxy $(date +%H:%M:%S)] $*" >&2; }

COUNT=2000 WARM=100 BYTES=2000000000 STREAMS=4 IDLE=10000 TASKS=100 EXITS=1000
PROFILE=release BUILD=1 OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) COUNT=50 WARM=10 BYTES=50000000 IDLE=200 TASKS=10 EXITS=100; shift; continue ;;
    --debug) PROFILE=debug; shift; continue ;;
    --no-build) BUILD=; shift; continue ;;
    -h | --help) usage; exit 0 ;;
  esac
  [ $# -ge 2 ] || die "$1 needs a value (see --help)"
  case $1 in
    --count) COUNT=$2 ;;
    --bytes) BYTES=$2 ;;
    --streams) STREAMS=$2 ;;
    --idle) IDLE=$2 ;;
    --tasks) TASKS=$2 ;;
    --out) OUT=$2 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift 2
done
for tool in haproxy python3 taskset; do
  command -v "$tool" >/dev/null || die "needs $tool"
done

TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/$PROFILE
OUT=${OUT:-$TARGET/bench/proxy-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -n "$BUILD" ]; then
  flag=--release
  [ "$PROFILE" = debug ] && flag=
  say "building ($PROFILE)"
  cargo build $flag -p exitvoice -p exitvoice-exitsim -p exitvoice-brokerload \
    -p exitvoice-proxyload --bin exitvoice --bin exitsim --bin brokerload --bin proxyload >&2
fi
for bin in exitvoice exitsim brokerload proxyload; do
  [ -x "$BIN/$bin" ] || die "no $bin in $BIN (drop --no-build)"
done

# Two descriptors per idle tunnel in each of the broker, exitsim and proxyload, and a margin.
ulimit -n "$(ulimit -Hn)"
FITS=$(( ($(ulimit -n) - 200) / 2 ))
[ "$IDLE" -le "$FITS" ] || { say "--idle $IDLE cut to $FITS (ulimit -Hn $(ulimit -Hn))"; IDLE=$FITS; }

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
# Waits for a line matching $2 in file $1 (a process's output); prints it.
await_line() {
  for _ in $(seq 300); do
    grep -m1 "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  die "no \"$2\" in $1"
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

export EXITVOICE_BROKER_TOKEN=bench-proxy-token-$RANDOM$RANDOM
export EXITSIM_PASSWORD=bench-exit-pw-$RANDOM$RANDOM

say "exitsim: $EXITS exits"
taskset -c 1 "$BIN/exitsim" serve --exits "$EXITS" --password "$EXITSIM_PASSWORD" \
  --http 127.0.0.1:0 >"$OUT/exitsim.out" 2>"$OUT/exitsim.log" &
EXITSIM_PID=$!
PIDS+=("$EXITSIM_PID")
EXIT_ADDR=$(await_line "$OUT/exitsim.out" "http CONNECT exits on" | sed 's/.* on //')

say "seed and broker"
"$BIN/brokerload" seed --database "$OUT/broker.db" --exits "$EXITS" --out "$OUT/exits.toml" \
  --exitsim "$EXIT_ADDR"
taskset -c 0 "$BIN/exitvoice" broker --exits "$OUT/exits.toml" --database "$OUT/broker.db" \
  --listen 127.0.0.1:0 --proxy-listen 127.0.0.1:0 --tunnel-idle 10m --instance bench \
  >"$OUT/broker.out" 2>"$OUT/broker.log" &
BROKER_PID=$!
PIDS+=("$BROKER_PID")
await_line "$OUT/broker.out" "listening on" >/dev/null
PROXY_ADDR=$(grep -m1 "forward proxy on" "$OUT/broker.out" | sed 's/.* on \([^ ]*\).*/\1/')

HAPROXY_ADDR=127.0.0.1:$(free_port)
cat >"$OUT/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 1000
defaults
    mode tcp
    timeout connect 5s
    timeout client 10m
    timeout server 10m
frontend relay
    bind $HAPROXY_ADDR
    default_backend exitsim
backend exitsim
    server exitsim $EXIT_ADDR
EOF
taskset -c 0 haproxy -db -f "$OUT/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
HAPROXY_PID=$!
PIDS+=("$HAPROXY_PID")
for _ in $(seq 50); do (exec 3<>"/dev/tcp/${HAPROXY_ADDR%:*}/${HAPROXY_ADDR#*:}") 2>/dev/null && break; sleep 0.1; done

CPU_MODEL=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
say "first byte: $COUNT tunnels per path"
taskset -c 1 "$BIN/proxyload" ttfb --broker-proxy "$PROXY_ADDR" --exit "$EXIT_ADDR" \
  --count "$COUNT" --warm-up "$WARM" >"$OUT/ttfb.json"

pump() {
  taskset -c 1 "$BIN/proxyload" pump --proxy "$1" --user "$2" --bytes "$BYTES" \
    --tunnels "$STREAMS" --watch "relay=$3" --watch "exitsim=$EXITSIM_PID"
}
say "relay: $BYTES bytes over $STREAMS tunnels, broker then HAProxy"
PROXYLOAD_PASSWORD=$EXITVOICE_BROKER_TOKEN pump "$PROXY_ADDR" class-anonymous "$BROKER_PID" >"$OUT/pump-broker.json"
PROXYLOAD_PASSWORD=$EXITSIM_PASSWORD pump "$HAPROXY_ADDR" exit-1 "$HAPROXY_PID" >"$OUT/pump-haproxy.json"

say "idle: $IDLE tunnels over $TASKS tasks"
PROXYLOAD_PASSWORD=$EXITVOICE_BROKER_TOKEN taskset -c 1 "$BIN/proxyload" idle --proxy "$PROXY_ADDR" \
  --tunnels "$IDLE" --tasks "$TASKS" --watch "$BROKER_PID" >"$OUT/idle.json"

TABLE=$OUT/results.md
echo "$(date -u +%Y-%m-%d), $CPU_MODEL, $(nproc) CPUs, load average before: $LOAD, profile $PROFILE" >"$TABLE"
python3 - "$OUT" >>"$TABLE" <<'EOF'
import json, sys
out = sys.argv[1]
read = lambda name: json.load(open(f"{out}/{name}.json"))
ttfb, idle = read("ttfb"), read("idle")
print("\n| path | first byte p50 / p99 ms | added p50 / p99 ms |\n|---|---:|---:|")
for name in ("direct", "new_lease", "task_lease"):
    p = ttfb["paths"][name]
    print(f"| {name} | {p['p50_ms']:.3f} / {p['p99_ms']:.3f} | {p['added_p50_ms']:.3f} / {p['added_p99_ms']:.3f} |")
print("\n| relay | GB | MB/s | relay CPU s per GB | × HAProxy's | exitsim CPU s per GB |")
print("|---|---:|---:|---:|---:|---:|")
haproxy = read("pump-haproxy")["cpu"]["relay"]["cpu_s_per_gb"]
for relay in ("broker", "haproxy"):
    r = read(f"pump-{relay}")
    cpu = r["cpu"]["relay"]["cpu_s_per_gb"]
    ratio = f"{cpu / haproxy:.2f}" if haproxy else "-"
    print(f"| {relay} | {r['bytes'] / 1e9:.2f} | {r['mb_per_s']:.0f} | {cpu:.3f} | {ratio} | {r['cpu']['exitsim']['cpu_s_per_gb']:.3f} |")
print("\n| idle tunnels | tasks | refused | closed while idle | broker RSS before → after MiB "
      "| per tunnel KiB | kernel TCP memory growth MiB |\n|---:|---:|---:|---:|---:|---:|---:|")
tcp = (idle["tcp_mem_pages_after"] - idle["tcp_mem_pages_before"]) * 4 / 1024
print(f"| {idle['tunnels']} | {idle['tasks']} | {idle['refused']} | {idle['closed_while_idle']} "
      f"| {idle['rss_kib_before'] / 1024:.0f} → {idle['rss_kib_after'] / 1024:.0f} "
      f"| {idle['rss_bytes_per_tunnel'] / 1024:.1f} | {tcp:.1f} |")
if idle["refused"] or idle["closed_while_idle"]:
    sys.exit(f"bench-proxy: {idle['refused']} idle tunnels refused, {idle['closed_while_idle']} "
             f"closed (first: {idle['first_refusal']})")
EOF
cat "$TABLE"
