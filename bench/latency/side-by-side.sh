#!/usr/bin/env bash
# bench/latency/side-by-side.sh: exitvoice's round-trip-gap verdicts beside pingly's, in one run,
# on the same paths with a hidden leg of known length.
#
# Usage: bench/latency/side-by-side.sh --pingly BIN [--exitvoice BIN] [--out DIR]
#                                      [--python PY] [--runs N] [--delays "0 10 40 120"]
#                                      [--busy "50 200"] [--quick]
#   --pingly BIN     a pingly server binary with its packet capture (pingly is an outside
#                    project: nothing of it is in this repository); `--no-pingly` runs the
#                    exitvoice half alone
#   --exitvoice BIN  default target/release/exitvoice
#   --out DIR        raw outputs and results.md; default target/bench/latency-<date>/
#   --python PY      the test venv's Python (aiohttp, httpx, h2; scripts/install-test-deps.sh);
#                    default .tools/venv/bin/python (httpx through dante uses its `socksio`)
#   --runs N         connections per client and path (default 3)
#   --delays LIST    the relay's delays D, ms each way (default "0 10 40 120")
#   --quick          smoke: one run, D = 40 ms only, no busy rows
#   --busy LIST      also direct with pingly's page keeping its main thread busy N ms at a time,
#                    back to back, for each N (default "50 200"; "" for none), Chromium only: the
#                    page's script answers pingly's probe, Chromium's network stack the echo's
#                    PINGs (the echo is loaded in a second tab meanwhile)
#
# Everything listens on 127.0.0.1: `exitvoice serve` (a throwaway database), pingly (its TLS on a
# free port, its packet capture on `lo`), squid (HTTP CONNECT) and dante (SOCKS5), both without
# authentication (Chromium takes no proxy credentials on its command line), and one delaying
# relay (side_by_side.py) in front of each proxy per D. Paths: direct; squid behind D; dante
# behind D. The relay is the hidden leg: the servers' TCP peer is the proxy on loopback, and
# every application round trip crosses the relay twice, so a gap of about 2·D is expected.
#
# Per path and run: one headless Chromium (fresh profile) loads the echo's /api/all, then
# pingly's page, and runs pingly's own latency probe (its "Measure latency" button: a WebSocket
# round trip series against the SYN-ACK→ACK time of pingly's capture); curl --http2 and httpx
# (HTTP/2) each fetch the echo's /api/all. Prints the markdown table and keeps it in
# DIR/results.md, every client's raw answer in DIR/raw/, and the servers' logs.
#
# Needs root (pingly's capture, squid's user switch), chromium, curl, squid, dante-server.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$REPO/bench/latency"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; exit 2; }

PINGLY="" NO_PINGLY=0 EXITVOICE="$REPO/target/release/exitvoice" OUT="" RUNS=3
PYTHON="$REPO/.tools/venv/bin/python" DELAYS="0 10 40 120" RELAY_PORT=""
BUSY="50 200"
while [ $# -gt 0 ]; do
  case "$1" in
  --pingly) PINGLY="$2"; shift 2 ;;
  --no-pingly) NO_PINGLY=1; shift ;;
  --exitvoice) EXITVOICE="$2"; shift 2 ;;
  --out) OUT="$2"; shift 2 ;;
  --python) PYTHON="$2"; shift 2 ;;
  --runs) RUNS="$2"; shift 2 ;;
  --delays) DELAYS="$2"; shift 2 ;;
  --busy) BUSY="$2"; shift 2 ;;
  --quick) RUNS=1 DELAYS=40 BUSY=""; shift ;;
  -h | --help) usage ;;
  *) echo "unknown argument: $1" >&2; usage ;;
  esac
done
if [ -z "$PINGLY" ] && [ "$NO_PINGLY" = 0 ]; then
  echo "--pingly BIN is required (or --no-pingly)" >&2; usage
fi
[ "$(id -u)" = 0 ] || { echo "needs root (pingly's packet capture, squid's user switch)" >&2; exit 1; }
for tool in "$EXITVOICE" "$PYTHON" ${PINGLY:+"$PINGLY"}; do
  [ -x "$tool" ] || { echo "not executable: $tool" >&2; exit 1; }
done
for tool in /usr/bin/chromium curl squid danted ss; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done
OUT="${OUT:-$REPO/target/bench/latency-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT/raw" "$OUT/echo" "$OUT/pingly" "$OUT/squid" "$OUT/dante" "$OUT/relays" "$OUT/chromium"
OUT="$(cd "$OUT" && pwd)"
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"

PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

helper() { "$PYTHON" "$HERE/side_by_side.py" "$@"; }

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_listen PID PORT: until process PID listens on 127.0.0.1:PORT (10 s).
wait_listen() {
  local pid="$1" port="$2"
  for _ in $(seq 1 100); do
    ss -ltnpH "sport = :$port" | grep -q "pid=$pid," && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "process $pid did not listen on 127.0.0.1:$port" >&2
  return 1
}

# --- the echo ----------------------------------------------------------------------------------
(cd "$OUT/echo" && exec "$EXITVOICE" serve --listen 127.0.0.1:0 --db "$OUT/echo/echo.db" \
  --per-ip-rate 0 --per-ip-connections 100000 --penalty-strikes 0 \
  >"$OUT/echo/serve.out" 2>"$OUT/echo/serve.log") &
PIDS+=("$!")
ECHO_PORT=""
for _ in $(seq 1 300); do
  if grep -q "certificate pin" "$OUT/echo/serve.out" 2>/dev/null; then
    ECHO_PORT="$(sed -n 's#.*listening on https://127\.0\.0\.1:\([0-9]*\).*#\1#p' "$OUT/echo/serve.out" | head -1)"
    break
  fi
  sleep 0.1
done
[ -n "$ECHO_PORT" ] || { echo "exitvoice serve did not start:" >&2; tail -20 "$OUT/echo/serve.log" >&2; exit 1; }
ECHO_URL="https://127.0.0.1:$ECHO_PORT/api/all"
echo "echo:   $ECHO_URL" >&2

# --- pingly ------------------------------------------------------------------------------------
PINGLY_URL="-"
if [ "$NO_PINGLY" = 0 ]; then
  PINGLY_PORT="$(free_port)"
  # Its self-signed certificate goes to STATE_DIRECTORY, not to the user's cache.
  STATE_DIRECTORY="$OUT/pingly/state" "$PINGLY" run --bind "127.0.0.1:$PINGLY_PORT" \
    --tcp-capture-packet --tcp-capture-interface lo --log info >"$OUT/pingly/pingly.log" 2>&1 &
  PIDS+=("$!")
  wait_listen "$!" "$PINGLY_PORT" || { tail -20 "$OUT/pingly/pingly.log" >&2; exit 1; }
  PINGLY_URL="https://127.0.0.1:$PINGLY_PORT/"
  echo "pingly: $PINGLY_URL" >&2
fi

# --- squid and dante, no authentication, loopback only -----------------------------------------
SQUID_PORT="$(free_port)"
cat >"$OUT/squid/squid.conf" <<CONF
http_port 127.0.0.1:$SQUID_PORT
visible_hostname exitvoice-bench-squid
cache_effective_user proxy
pid_filename $OUT/squid/squid-internal.pid
access_log stdio:$OUT/squid/access.log
cache_log $OUT/squid/cache.log
cache_store_log none
coredump_dir $OUT/squid
cache deny all
cache_mem 8 MB
shutdown_lifetime 1 seconds
acl loopback src 127.0.0.0/8
http_access allow loopback
http_access deny all
CONF
chown -R proxy:proxy "$OUT/squid"
squid -N -f "$OUT/squid/squid.conf" >"$OUT/squid/squid.out" 2>&1 &
PIDS+=("$!")
wait_listen "$!" "$SQUID_PORT" || { tail -20 "$OUT/squid/squid.out" >&2; exit 1; }

DANTE_PORT="$(free_port)"
cat >"$OUT/dante/danted.conf" <<CONF
logoutput: $OUT/dante/danted.log
internal: 127.0.0.1 port = $DANTE_PORT
external: 127.0.0.1
clientmethod: none
socksmethod: none
user.privileged: root
user.unprivileged: nobody
client pass {
  from: 127.0.0.0/8 to: 0.0.0.0/0
  log: error
}
socks pass {
  from: 127.0.0.0/8 to: 127.0.0.0/8
  command: connect
  log: connect disconnect error
}
socks block {
  from: 0.0.0.0/0 to: 0.0.0.0/0
  log: connect error
}
CONF
danted -f "$OUT/dante/danted.conf" -p "$OUT/dante/danted-internal.pid" >"$OUT/dante/danted.out" 2>&1 &
PIDS+=("$!")
wait_listen "$!" "$DANTE_PORT" || { tail -20 "$OUT/dante/danted.out" >&2; exit 1; }
echo "squid:  127.0.0.1:$SQUID_PORT   dante: 127.0.0.1:$DANTE_PORT" >&2

# relay TARGET_PORT DELAY_MS: starts a delaying relay; its port in RELAY_PORT.
relay() {
  local file="$OUT/relays/$1-$2"
  "$PYTHON" "$HERE/side_by_side.py" relay "$1" "$2" >"$file.port" 2>"$file.log" &
  PIDS+=("$!")
  for _ in $(seq 1 100); do
    if [ -s "$file.port" ]; then RELAY_PORT="$(head -1 "$file.port")"; return 0; fi
    sleep 0.1
  done
  echo "relay to $1 ($2 ms) did not start" >&2
  cat "$file.log" >&2
  return 1
}

# measure NAME DELAY BROWSER_PROXY CURL_PROXY PYTHON_PROXY: every client over one path ("" for
# direct; DELAY "-" when there is no relay).
measure() {
  local name="$1" delay="$2" browser_proxy="$3" curl_proxy="$4" python_proxy="$5" run tag
  for run in $(seq 1 "$RUNS"); do
    tag="$name-$delay-$run"
    echo "  $tag" >&2
    helper chromium "$OUT/chromium/$tag" "$ECHO_URL" "$PINGLY_URL" ${browser_proxy:+"$browser_proxy"} \
      >"$OUT/raw/$tag.chromium.json" 2>"$OUT/raw/$tag.chromium.err" || true
    helper record "$RESULTS" "$name" "$delay" chromium "$OUT/raw/$tag.chromium.json"
    curl -sS --http2 -k --max-time 20 ${curl_proxy:+-x "$curl_proxy"} "$ECHO_URL" \
      >"$OUT/raw/$tag.curl.json" 2>"$OUT/raw/$tag.curl.err" || true
    helper record "$RESULTS" "$name" "$delay" curl "$OUT/raw/$tag.curl.json"
    helper httpx "$ECHO_URL" ${python_proxy:+"$python_proxy"} \
      >"$OUT/raw/$tag.python.json" 2>"$OUT/raw/$tag.python.err" || true
    helper record "$RESULTS" "$name" "$delay" python "$OUT/raw/$tag.python.json"
  done
}

echo "measuring ($RUNS runs per client and path):" >&2
measure direct - "" "" ""
for busy in $BUSY; do
  for run in $(seq 1 "$RUNS"); do
    tag="direct-busy$busy-$run"
    echo "  $tag" >&2
    helper chromium --busy-ms "$busy" "$OUT/chromium/$tag" "$ECHO_URL" "$PINGLY_URL" \
      >"$OUT/raw/$tag.chromium.json" 2>"$OUT/raw/$tag.chromium.err" || true
    helper record "$RESULTS" "direct, pingly's page busy $busy ms" - chromium \
      "$OUT/raw/$tag.chromium.json"
  done
done
for delay in $DELAYS; do
  relay "$SQUID_PORT" "$delay"
  proxy="http://127.0.0.1:$RELAY_PORT"
  measure squid "$delay" "$proxy" "$proxy" "$proxy"
  relay "$DANTE_PORT" "$delay"
  measure dante "$delay" "socks5://127.0.0.1:$RELAY_PORT" "socks5h://127.0.0.1:$RELAY_PORT" \
    "socks5://127.0.0.1:$RELAY_PORT"
done

{
  echo "Machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs;" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end. $RUNS runs per cell."
  echo
  helper table "$RESULTS"
} | tee "$OUT/results.md"
echo "raw outputs: $OUT" >&2
