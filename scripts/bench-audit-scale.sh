#!/usr/bin/env bash
# scripts/bench-audit-scale.sh: one `exitvoice audit --once` through N simulated exits, on loopback.
#
# Usage: scripts/bench-audit-scale.sh [OPTIONS]
#
# Builds the release binaries (`exitvoice`, and `exitsim` from bench/exitsim/), then starts
# `exitvoice serve` on a free loopback port and a temporary database, with the per-source limits
# lifted (every probe comes from 127.0.0.1), and for each N of --exits:
#   1. `exitsim serve --exits N`: N exits on one HTTP CONNECT port and one SOCKS5 port (user
#      name `exit-<n>` picks the exit; even exits are HTTP, odd ones socks5h), each really
#      tunnelling to the echo server, and the exits file for them;
#   2. `/usr/bin/time -v exitvoice audit --once` on a fresh SQLite database (or, with --postgres,
#      a fresh database of a throwaway PostgreSQL cluster), --samples per exit,
#      --concurrency probes at once (the other flags at their defaults: 200 ms + up to 300 ms
#      between two samples of an exit, 2 retries);
#   3. reads the wall time and the auditor's peak RSS (time -v), the probes stored (all, failed,
#      distinct tokens), the echo server's request rows (the baseline's included), the
#      simulator's tunnel counters (`GET /stats`: tunnels, the most open at once on one exit),
#      and the CPU seconds (user + system) of the auditor, the echo server and the simulator
#      during the audit (/proc/PID/stat), and with --postgres the cluster's (its postmaster's
#      and closed backends'): on 2 cores, their sum over the wall time says whether the
#      machine, not the auditor, is the limit.
# Prints a markdown table and keeps it, with every log, in --out. Exits 1 if an audit failed or
# a count is off (probes stored ≠ N × K, a failed probe, a token stored twice, an echo request
# or a tunnel more or less than one per probe, two tunnels at once on one exit), so --quick can
# serve as a smoke check.
#
# Options
#   --exits "N ..."     exit counts measured, one audit each (default "400 2000 10000")
#   --samples K         samples per exit (default 4)
#   --concurrency C     `exitvoice audit --concurrency` (default 64)
#   --quick             smoke preset: --exits 200 (under 30 s once built)
#   --debug             build and run the dev profile (checks the harness; figures mean nothing)
#   --no-build          use the binaries already built
#   --postgres          the auditor's database on PostgreSQL: a throwaway cluster (Debian's
#                       server binaries, run as `postgres` when root) on a free loopback port,
#                       default settings, one fresh database per N; stopped at the end
#   --out DIR           results folder (default $CARGO_TARGET_DIR or target, then
#                       bench/audit-scale-YYYYmmdd-HHMMSS)
#
# Needs sqlite3 (psql with --postgres), curl and GNU time (/usr/bin/time). Other work on the machine disturbs the
# figures: check `uptime` first (the load average is recorded).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; }
die() { echo "bench-audit-scale: $*" >&2; exit 1; }
say() { echo "[bench-audit-scale $(date +%H:%M:%S)] $*" >&2; }

EXITS="400 2000 10000" SAMPLES=4 CONCURRENCY=64 PROFILE=release BUILD=1 OUT= BAD= PG=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) EXITS=200; shift; continue ;;
    --debug) PROFILE=debug; shift; continue ;;
    --no-build) BUILD=; shift; continue ;;
    --postgres) PG=1; shift; continue ;;
    -h | --help) usage; exit 0 ;;
  esac
  [ $# -ge 2 ] || die "$1 needs a value (see --help)"
  case $1 in
    --exits) EXITS=$2 ;;
    --samples) SAMPLES=$2 ;;
    --concurrency) CONCURRENCY=$2 ;;
    --out) OUT=$2 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift 2
done
for tool in sqlite3 curl /usr/bin/time; do
  command -v "$tool" >/dev/null || die "needs $tool"
done

TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/$PROFILE
OUT=${OUT:-$TARGET/bench/audit-scale-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
if [ -n "$BUILD" ]; then
  flag=--release
  [ "$PROFILE" = debug ] && flag=
  say "building ($PROFILE)"
  cargo build $flag -p exitvoice -p exitvoice-exitsim --bin exitvoice --bin exitsim >&2
fi
[ -x "$BIN/exitvoice" ] && [ -x "$BIN/exitsim" ] || die "no binaries in $BIN (drop --no-build)"

PIDS=()
. scripts/pg-cluster.sh
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop
}
trap cleanup EXIT

if [ -n "$PG" ]; then
  pg_start || die "--postgres could not start a cluster"
  say "PostgreSQL on 127.0.0.1:$PGPORT"
fi

# Waits until FILE has a line matching PATTERN (the process started) or gives up after 20 s.
await_line() {
  local file=$1 pattern=$2
  for _ in $(seq 200); do
    grep -q "$pattern" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  die "no '$pattern' in $file"
}

say "echo server"
"$BIN/exitvoice" serve --listen 127.0.0.1:0 --db "$OUT/echo.db" \
  --per-ip-rate 0 --per-ip-connections 100000 --max-connections 100000 --penalty-strikes 0 \
  >"$OUT/echo.out" 2>"$OUT/echo.log" &
ECHO_PID=$!
PIDS+=("$ECHO_PID")
await_line "$OUT/echo.out" "certificate pin"
ECHO_ADDR=$(sed -n 's/.*listening on https:\/\/\([^ ]*\).*/\1/p' "$OUT/echo.out" | head -1)
PIN=$(sed -n 's/.*certificate pin \([^ ]*\).*/\1/p' "$OUT/echo.out" | head -1)
[ -n "$ECHO_ADDR" ] && [ -n "$PIN" ] || die "echo address or pin missing from $OUT/echo.out"

# CPU seconds (user + system) PID has used so far.
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / hz }' "/proc/$1/stat"
}

# RFC 3986 unreserved characters only (exitsim's rule); the value never leaves $OUT.
PASSWORD=bench-$RANDOM$RANDOM

TABLE=$OUT/results.md
{
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); samples $SAMPLES, concurrency $CONCURRENCY, profile $PROFILE, auditor's database $([ -n "$PG" ] && echo PostgreSQL || echo SQLite)"
  echo
  echo "| exits | wall s | peak RSS MB | RSS per exit KB | probes stored | failed | distinct tokens | echo requests | tunnels | max tunnels on one exit | CPU s auditor / echo / exitsim | CPU s PostgreSQL |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$TABLE"

for n in $EXITS; do
  dir=$OUT/n$n
  mkdir -p "$dir"
  say "$n exits: simulator"
  "$BIN/exitsim" serve --exits "$n" --password "$PASSWORD" --http 127.0.0.1:0 \
    --socks 127.0.0.1:0 --stats 127.0.0.1:0 --exits-out "$dir/exits.toml" \
    --echo-url "https://$ECHO_ADDR" --echo-pin "$PIN" >"$dir/exitsim.out" 2>"$dir/exitsim.log" &
  sim=$!
  PIDS+=("$sim")
  await_line "$dir/exitsim.out" "^ready"
  STATS=$(sed -n 's/^stats on \(.*\)/\1/p' "$dir/exitsim.out")
  echo_before=$(sqlite3 "$OUT/echo.db" "SELECT count(*) FROM requests")
  echo_cpu_before=$(cpu_seconds "$ECHO_PID")
  sim_cpu_before=$(cpu_seconds "$sim")

  if [ -n "$PG" ]; then
    DB=$(pg_createdb "audit_n$n")
    pg_cpu_before=$(pg_cpu_seconds)
    query() { psql -At -F' ' "$DB" -c "$1"; }
  else
    DB=$dir/audit.db
    query() { sqlite3 -separator ' ' "$DB" "$1"; }
  fi
  say "$n exits: audit ($SAMPLES samples, concurrency $CONCURRENCY)"
  status=0
  /usr/bin/time -v -o "$dir/time.txt" "$BIN/exitvoice" audit --exits "$dir/exits.toml" \
    --database "$DB" --once --labels-out "$dir/labels.json" --samples "$SAMPLES" \
    --concurrency "$CONCURRENCY" >"$dir/audit.out" 2>"$dir/audit.log" || status=$?
  [ "$status" = 0 ] || say "$n exits: audit exited $status (see $dir/audit.log)"
  pg_cpu=-
  if [ -n "$PG" ]; then
    # The auditor's backends have closed; give the postmaster a moment to reap them.
    sleep 1
    pg_cpu=$(awk -v a="$(pg_cpu_seconds)" -v b="$pg_cpu_before" 'BEGIN { printf "%.1f", a - b }')
  fi

  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$dir/time.txt" |
    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }')
  rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$dir/time.txt")
  audit_cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.1f", s }' "$dir/time.txt")
  echo_cpu=$(awk -v a="$(cpu_seconds "$ECHO_PID")" -v b="$echo_cpu_before" 'BEGIN { printf "%.1f", a - b }')
  sim_cpu=$(awk -v a="$(cpu_seconds "$sim")" -v b="$sim_cpu_before" 'BEGIN { printf "%.1f", a - b }')
  read -r stored failed tokens < <(query \
    "SELECT count(*), count(error_class), count(DISTINCT token) FROM probes WHERE exit_name IS NOT NULL")
  # The echo's writer batches: give it a moment to store the last requests.
  sleep 1
  echoed=$(( $(sqlite3 "$OUT/echo.db" "SELECT count(*) FROM requests") - echo_before ))
  stats=$(curl -fsS "$STATS")
  tunnels=$(sed -n 's/.*"tunnels":\([0-9]*\).*/\1/p' <<<"$stats")
  max_open=$(sed -n 's/.*"max_in_flight_per_exit":\([0-9]*\).*/\1/p' <<<"$stats")
  kill "$sim" 2>/dev/null || true
  wait "$sim" 2>/dev/null || true

  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %s |\n' "$n" "$wall" \
    "$((rss_kb / 1024))" "$((rss_kb / n))" "$stored" "$failed" "$tokens" "$echoed" \
    "$tunnels" "$max_open" "$audit_cpu" "$echo_cpu" "$sim_cpu" "$pg_cpu" >>"$TABLE"
  say "$n exits: ${wall} s, peak RSS $((rss_kb / 1024)) MB, $stored probes stored ($failed failed)"
  expected=$((n * SAMPLES))
  # The echo's rows include the baseline's request.
  if [ "$status" != 0 ] || [ "$stored" != "$expected" ] || [ "$failed" != 0 ] ||
    [ "$tokens" != "$expected" ] || [ "$echoed" != "$((expected + 1))" ] ||
    [ "$tunnels" != "$expected" ] || [ "$max_open" != 1 ]; then
    say "$n exits: counts off (expected $expected probes, tunnels and tokens, one tunnel per exit at once)"
    BAD=1
  fi
done

cat "$TABLE"
say "results in $OUT"
[ -z "$BAD" ] || die "some counts were off (see above)"
