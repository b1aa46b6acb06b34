#!/usr/bin/env bash
# scripts/bench.sh: exitvoice against a bare rustls + hyper echo, side by side, on loopback.
#
# Usage: scripts/bench.sh [OPTIONS]
#
# Builds the release binaries (`exitvoice`, `baseline-echo` of bench/baseline/, `floor-echo` of
# bench/floor/ and `store-bench` of bench/store/), then:
#   1. Side by side. Starts `baseline-echo` and one `exitvoice serve` per --paths entry (per-source
#      limits lifted for the load tool), all at once, each on a free loopback port, each exitvoice
#      on its own temporary database, all pinned to --server-cpu; h2load runs pinned to
#      --client-cpu. For each round and each test, the load alternates between the targets in
#      short slices (baseline, then each exitvoice), so that the host's drift hits all alike:
#        (a) a new TLS connection per request over h2: --batches slices of
#            `h2load -n B -c B -m 1` per target
#        (b) h2 keep-alive:        `h2load -D --slice-seconds -c 10 -m 10`, --seconds in all
#        (c) HTTP/1.1 keep-alive:  `h2load --h1 -D --slice-seconds -c 10`, --seconds in all
#      After each exitvoice slice it waits 0.2 s, twice the writer's flush interval, so that the
#      commits run before the next target's slice. Per test and target it reads the server's
#      utime+stime (/proc/PID/stat) before the first slice and after the writer went quiet
#      (stored rows and database pages unchanged for 0.6 s), resets and reads the peak RSS
#      (VmHWM, via /proc/PID/clear_refs), and reads the database's size in pages (what the test
#      added, WAL included).
#   2. Drops. A fresh `exitvoice serve` with default flags (only --listen and --db set), one client
#      at full keep-alive speed (`h2load -D --drops-seconds -c 4 -m 10 …/api/clean`): requests
#      answered, rows stored, what /healthz counts as dropped, and the database's bytes on disk
#      (file + -wal after SIGTERM drained the queue) per request.
#   3. Store. `store-bench` (bench/store/) writes --store-rows request rows, shaped like h2
#      keep-alive traffic (100 requests per connection), through the store's batched writes
#      (`Store::write_batch`, batches of 256 jobs as the writer makes them) into a fresh database,
#      pinned to --server-cpu: request rows per second and database bytes per request row.
#   4. Prints markdown tables (ratios to the baseline) and keeps them, with every raw output, in
#      --out.
#
# Options
#   --rounds N          rounds of the side-by-side tests (default 3)
#   --tests LIST        side-by-side tests, letters of abc (default abc)
#   --paths "P ..."     exitvoice paths measured (default "/api/clean /api/all"); the baseline
#                       answers any path
#   --compare BIN       another exitvoice binary (a build of other code, or with other build
#                       settings), run beside the built one on each path of the side-by-side
#                       tests as target `compare/PATH`: two builds compared in one run, under the
#                       same drift (the drops and store runs use the built one only)
#   --floor "PART ..."  also runs `floor-echo` (bench/floor/: the baseline plus the least of the
#                       issue's work, with exitvoice's own analysis and store) once per PART, as
#                       target `floor/PART`: `nothing` (the baseline's work in that binary, a
#                       control), `capture`, `analysis`, `store` (each with the parts before it);
#                       what the work costs done the shortest way, beside what exitvoice pays
#   --batches N         (a): h2load runs per round and target (default 20)
#   --batch-size N      (a): connections opened at once per run (default 100)
#   --seconds S         (b), (c): seconds per round and target (default 10)
#   --slice-seconds S   (b), (c): seconds of one slice (default 2)
#   --drops-seconds S   the drops run (default 60; 0 skips it)
#   --store-rows N      the store run (default 200000; 0 skips it)
#   --quick             smoke preset: --rounds 1 --batches 2 --batch-size 20 --seconds 2
#                       --drops-seconds 5 --store-rows 20000
#   --debug             build and run the dev profile (target/debug): checks the harness, the
#                       figures mean nothing
#   --no-build          use the binaries already in target/
#   --server-cpu N      CPU the servers are pinned to (default 0)
#   --client-cpu N      CPU h2load is pinned to (default 1)
#   --out DIR           results folder (default target/bench/YYYYmmdd-HHMMSS)
#
# Needs h2load (Debian: nghttp2-client), sqlite3, curl, taskset, python3. Loopback only. Other work
# on the machine disturbs the figures: check `uptime` first (the load average is recorded).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//p}' "$0"; }
die() { echo "bench: $*" >&2; exit 1; }
say() { echo "[bench $(date +%H:%M:%S)] $*" >&2; }

ROUNDS=3 TESTS=abc PATHS="/api/clean /api/all" BATCHES=20 BATCH=100 SECS=10 SLICE_SECS=2 DROP_SECS=60
STORE_ROWS=200000
PROFILE=release BUILD=1 SCPU=0 CCPU=1 OUT= COMPARE= FLOOR=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) ROUNDS=1 BATCHES=2 BATCH=20 SECS=2 DROP_SECS=5 STORE_ROWS=20000; shift; continue ;;
    --debug) PROFILE=debug; shift; continue ;;
    --no-build) BUILD=; shift; continue ;;
    -h | --help) usage; exit 0 ;;
  esac
  [ $# -ge 2 ] || die "$1 needs a value (see --help)"
  case $1 in
    --rounds) ROUNDS=$2 ;;
    --tests) TESTS=$2 ;;
    --paths) PATHS=$2 ;;
    --compare) COMPARE=$2 ;;
    --floor) FLOOR=$2 ;;
    --batches) BATCHES=$2 ;;
    --batch-size) BATCH=$2 ;;
    --seconds) SECS=$2 ;;
    --slice-seconds) SLICE_SECS=$2 ;;
    --drops-seconds) DROP_SECS=$2 ;;
    --store-rows) STORE_ROWS=$2 ;;
    --server-cpu) SCPU=$2 ;;
    --client-cpu) CCPU=$2 ;;
    --out) OUT=$2 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift 2
done
for v in ROUNDS BATCHES BATCH SECS SLICE_SECS DROP_SECS STORE_ROWS SCPU CCPU; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "${v,,} must be a whole number, got '${!v}'"
done
[[ $TESTS =~ ^[abc]*$ ]] || die "--tests takes letters of abc, got '$TESTS'"
for part in $FLOOR; do
  [[ $part =~ ^(nothing|capture|analysis|store)$ ]] || die "--floor: no part '$part' (see --help)"
done
[ "$SLICE_SECS" -gt 0 ] || die "--slice-seconds must be at least 1"
for tool in h2load sqlite3 curl taskset python3; do
  command -v "$tool" > /dev/null || die "$tool is missing (h2load: apt-get install nghttp2-client)"
done
taskset -c "$SCPU" true 2> /dev/null || die "no CPU $SCPU here (--server-cpu)"
taskset -c "$CCPU" true 2> /dev/null || die "no CPU $CCPU here (--client-cpu)"

TARGET_DIR=${CARGO_TARGET_DIR:-target}
if [ -n "$BUILD" ]; then
  say "building ($PROFILE)"
  flags=()
  [ "$PROFILE" = debug ] || flags=(--release)
  cargo build "${flags[@]}" --quiet -p exitvoice --bin exitvoice -p exitvoice-baseline --bin baseline-echo \
    -p exitvoice-store-bench --bin store-bench -p exitvoice-floor --bin floor-echo
fi
EV=$TARGET_DIR/$PROFILE/exitvoice
BASE=$TARGET_DIR/$PROFILE/baseline-echo
STORE=$TARGET_DIR/$PROFILE/store-bench
FLOOR_ECHO=$TARGET_DIR/$PROFILE/floor-echo
[ -z "$COMPARE" ] || [ -x "$COMPARE" ] || die "--compare: $COMPARE is not an executable"
for bin in "$EV" "$BASE" "$STORE" ${FLOOR:+"$FLOOR_ECHO"}; do
  [ -x "$bin" ] || die "$bin is not built (drop --no-build)"
done

OUT=${OUT:-$TARGET_DIR/bench/$(date +%Y%m%d-%H%M%S)}
[ ! -e "$OUT/records.tsv" ] || die "$OUT already holds results"
mkdir -p "$OUT/raw" "$OUT/db" "$OUT/drops" "$OUT/store"
CLK_TCK=$(getconf CLK_TCK)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "results in $OUT; load average $LOAD_BEFORE"
{
  printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf 'commit\t%s\n' "$(git rev-parse --short HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD 2> /dev/null || echo +dirty)"
  printf 'cpu\t%s\n' "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
  printf 'nproc\t%s\n' "$(nproc)"
  printf 'kernel\t%s\n' "$(uname -r)"
  printf 'h2load\t%s\n' "$(h2load --version | head -n 1)"
  printf 'load_before\t%s\n' "$LOAD_BEFORE"
  printf 'profile\t%s\nclk_tck\t%s\nrounds\t%s\ntests\t%s\n' "$PROFILE" "$CLK_TCK" "$ROUNDS" "$TESTS"
  printf 'batches\t%s\nbatch_size\t%s\nseconds\t%s\nslice_seconds\t%s\n' "$BATCHES" "$BATCH" "$SECS" "$SLICE_SECS"
  printf 'drops_seconds\t%s\nstore_rows\t%s\n' "$DROP_SECS" "$STORE_ROWS"
  printf 'server_cpu\t%s\nclient_cpu\t%s\n' "$SCPU" "$CCPU"
  [ -z "$COMPARE" ] || printf 'compare\t%s (%s)\n' "$COMPARE" "$("$COMPARE" --version 2> /dev/null | head -n 1)"
  [ -z "$FLOOR" ] || printf 'floor\t%s\n' "$FLOOR"
} > "$OUT/meta.tsv"

# ---------- processes ----------
SERVERS=() # PIDs this script started and has not stopped yet
cleanup() {
  local pid
  for pid in "${SERVERS[@]}"; do
    kill -TERM "$pid" 2> /dev/null || true
  done
  for pid in "${SERVERS[@]}"; do
    wait "$pid" 2> /dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME LOG COMMAND...: runs COMMAND pinned to the server CPU; sets PID and ADDR (from the
# "listening on https://ADDR" line both servers print).
start() {
  local name=$1 log=$2 i
  shift 2
  : > "$log" # exists before the server (in the background) opens it
  taskset -c "$SCPU" "$@" > "$log" 2> "$log.err" < /dev/null &
  PID=$!
  SERVERS+=("$PID")
  for ((i = 0; i < 300; i++)); do
    ADDR=$(sed -n 's|.*listening on https://\([^ ]*\).*|\1|p' "$log" | head -n 1)
    # exitvoice prints its pin once it is ready; the baseline and the floor are ready when they
    # print their address.
    if [ -n "$ADDR" ] && { [[ $name =~ ^(baseline|floor/) ]] || grep -q 'certificate pin' "$log"; }; then
      say "$name is up on $ADDR (pid $PID)"
      return 0
    fi
    kill -0 "$PID" 2> /dev/null || { cat "$log.err" >&2; die "$name exited at start"; }
    sleep 0.1
  done
  die "$name did not start within 30 s (see $log.err)"
}

# stop PID: SIGTERM (exitvoice drains its queue), then wait for it to exit.
stop() {
  local pid=$1 rest=() p
  kill -TERM "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  for p in "${SERVERS[@]}"; do [ "$p" = "$pid" ] || rest+=("$p"); done
  SERVERS=("${rest[@]+"${rest[@]}"}")
}

cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; } # utime + stime
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
# Peak RSS back to the current RSS, so the next reading is this test's peak (needs the process's
# owner or root; without it the peak is the process's since start).
reset_hwm() { echo 5 > "/proc/$1/clear_refs" 2> /dev/null || true; }

# The table a request is stored in: `requests` once connections and requests are split, else
# `observations`.
rows_table() {
  sqlite3 -readonly "$1" "SELECT name FROM sqlite_master WHERE type = 'table'
    AND name IN ('requests', 'observations') ORDER BY name = 'requests' DESC LIMIT 1"
}
# "BYTES ROWS" of a live database: its size in pages (WAL included) and its stored rows.
db_state() {
  taskset -c "$CCPU" sqlite3 -readonly "$1" \
    "SELECT (SELECT page_count * page_size FROM pragma_page_count, pragma_page_size), (SELECT count(*) FROM $2)" |
    tr '|' ' '
}
# Waits until the writer is quiet (the database unchanged for 3 readings 0.2 s apart, at most
# 60 s), then prints "BYTES ROWS".
settle() {
  local now last='' same=0 i
  for ((i = 0; i < 300 && same < 3; i++)); do
    sleep 0.2
    now=$(db_state "$1" "$2")
    if [ "$now" = "$last" ]; then same=$((same + 1)); else same=0 last=$now; fi
  done
  echo "$last"
}

# h2load pinned to the client CPU; its output goes to FILE.
load() {
  local file=$1
  shift
  taskset -c "$CCPU" h2load "$@" > "$file" 2>&1 || true
}
# "OK FAILED SECONDS" summed over h2load outputs: 2xx answers, requests that failed or errored,
# and the measurement time.
h2stats() {
  awk '/^finished in/ { d = $3; sub(/,$/, "", d); u = d; gsub(/[0-9.]/, "", u); sub(/[a-z]+$/, "", d)
                        secs += d * (u == "ms" ? 0.001 : u == "us" ? 0.000001 : 1) }
       /^requests:/ { failed += $10 + $12 }
       /^status codes:/ { ok += $3 }
       END { printf "%d %d %.6f\n", ok, failed, secs }' "$@"
}

# ---------- 1. side by side ----------
if [ -n "$TESTS" ] && [ "$ROUNDS" -gt 0 ]; then
  # One process per target, all up at once, so that the load can alternate between them in short
  # slices: the host's speed drifts by tens of per cent within a minute, and a slice of each
  # target in turn puts the drift on all alike. The exitvoice processes share the first one's
  # certificate, which the baseline serves too. Limits per source lifted: h2load is one source
  # opening connections as fast as it can.
  TARGETS=()          # "NAME PID URL DB" (DB empty for the baseline)
  declare -A TABLE=() # each exitvoice's table of requests (a --compare build may predate the split)
  EVDB=               # the first exitvoice's database, beside which its certificate is
  for p in $PATHS; do
    for label in exitvoice ${COMPARE:+compare}; do
      bin=$EV
      [ "$label" = exitvoice ] || bin=$COMPARE
      name=$label$p
      db=$OUT/db/${name//\//_}.db
      cert=()
      [ -z "$EVDB" ] || cert=(--cert "$EVDB.cert.pem" --key "$EVDB.key.pem")
      start "$name" "$OUT/${name//\//_}.log" "$bin" serve --listen 127.0.0.1:0 --db "$db" \
        --per-ip-rate 0 --per-ip-connections 100000 --max-connections 100000 --penalty-strikes 0 \
        "${cert[@]+"${cert[@]}"}"
      [ -n "$EVDB" ] || EVDB=$db
      TABLE[$name]=$(rows_table "$db")
      [ -n "${TABLE[$name]}" ] || die "no requests or observations table in $db"
      TARGETS+=("$name $PID https://$ADDR$p $db")
    done
  done
  start baseline "$OUT/baseline.log" "$BASE" --listen 127.0.0.1:0 \
    --cert "$EVDB.cert.pem" --key "$EVDB.key.pem"
  TARGETS=("baseline $PID https://$ADDR/api/clean " "${TARGETS[@]}")
  for part in $FLOOR; do
    name=floor/$part
    db=$OUT/db/floor_$part.db
    start "$name" "$OUT/floor_$part.log" "$FLOOR_ECHO" --listen 127.0.0.1:0 \
      --cert "$EVDB.cert.pem" --key "$EVDB.key.pem" --db "$db" --upto "$part"
    TABLE[$name]=requests
    TARGETS+=("$name $PID https://$ADDR/api/clean $db")
  done
  printf 'rows_table\t%s\n' "$(rows_table "$EVDB")" >> "$OUT/meta.tsv"

  say "warming up"
  for t in "${TARGETS[@]}"; do
    read -r name _ url _ <<< "$t"
    load "$OUT/raw/warm-${name//\//_}.txt" -n 2000 -c 10 -m 10 "$url"
    read -r ok _ < <(h2stats "$OUT/raw/warm-${name//\//_}.txt")
    [ "$ok" -gt 0 ] || die "warm-up of $name: no 2xx answer (see $OUT/raw/)"
  done

  printf 'round\ttest\ttarget\tok\tfailed\tseconds\tcpu_ticks\thwm_kib\tdb_bytes\trows\tload1\n' > "$OUT/records.tsv"
  for ((r = 1; r <= ROUNDS; r++)); do
    for ((k = 0; k < ${#TESTS}; k++)); do
      test=${TESTS:k:1}
      case $test in
        a) slices=$BATCHES ;;
        *) slices=$(((SECS + SLICE_SECS - 1) / SLICE_SECS)) ;;
      esac
      declare -A c0=() db0=()
      for t in "${TARGETS[@]}"; do
        read -r name pid _ db <<< "$t"
        db0[$name]='0 0'
        [ -z "$db" ] || db0[$name]=$(settle "$db" "${TABLE[$name]}")
        reset_hwm "$pid"
        c0[$name]=$(cpu_ticks "$pid")
      done
      for ((s = 1; s <= slices; s++)); do
        for t in "${TARGETS[@]}"; do
          read -r name pid url db <<< "$t"
          raw=$OUT/raw/r$r-$test-${name//\//_}-$s.txt
          case $test in
            a) load "$raw" -n "$BATCH" -c "$BATCH" -m 1 "$url" ;;
            b) load "$raw" -D "$SLICE_SECS" -c 10 -m 10 "$url" ;;
            c) load "$raw" --h1 -D "$SLICE_SECS" -c 10 "$url" ;;
          esac
          # exitvoice's writer commits what the slice queued within --flush-interval (100 ms):
          # in its own slice's time, not while the next target runs on the same CPU.
          [ -z "$db" ] || sleep 0.2
        done
      done
      for t in "${TARGETS[@]}"; do
        read -r name pid _ db <<< "$t"
        db1='0 0'
        [ -z "$db" ] || db1=$(settle "$db" "${TABLE[$name]}")
        c1=$(cpu_ticks "$pid")
        kill -0 "$pid" 2> /dev/null || die "$name died in round $r test $test"
        read -r ok failed secs < <(h2stats "$OUT/raw/r$r-$test-${name//\//_}"-*.txt)
        read -r bytes0 rows0 <<< "${db0[$name]}"
        read -r bytes1 rows1 <<< "$db1"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$test" "$name" "$ok" "$failed" "$secs" \
          "$((c1 - c0[$name]))" "$(hwm_kib "$pid")" "$((bytes1 - bytes0))" "$((rows1 - rows0))" \
          "$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/records.tsv"
        say "round $r/$ROUNDS ($test) $name: $ok ok, $failed failed, server CPU $((c1 - c0[$name])) ticks"
      done
    done
  done
  for t in "${TARGETS[@]}"; do
    read -r _ pid _ _ <<< "$t"
    stop "$pid"
  done
fi

# ---------- 2. drops: default flags, one client at full keep-alive speed ----------
if [ "$DROP_SECS" -gt 0 ]; then
  DDB=$OUT/drops/exitvoice.db
  start "exitvoice (default flags)" "$OUT/drops/exitvoice.log" "$EV" serve --listen 127.0.0.1:0 --db "$DDB"
  D_PID=$PID
  say "drops: one client, ${DROP_SECS} s at full keep-alive speed"
  reset_hwm "$D_PID"
  load "$OUT/drops/h2load.txt" -D "$DROP_SECS" -c 4 -m 10 "https://$ADDR/api/clean"
  # /healthz is read after the client: its own request is not in the h2load figures.
  curl -sk --max-time 10 "https://$ADDR/healthz" > "$OUT/drops/healthz.json" || true
  D_HWM=$(hwm_kib "$D_PID")
  stop "$D_PID"
  read -r ok failed secs < <(h2stats "$OUT/drops/h2load.txt")
  table=$(rows_table "$DDB")
  {
    printf 'answered\t%s\nfailed\t%s\nseconds\t%s\nhwm_kib\t%s\n' "$ok" "$failed" "$secs" "$D_HWM"
    printf 'rows_table\t%s\n' "$table"
    printf 'rows\t%s\n' "$(sqlite3 -readonly "$DDB" "SELECT count(*) FROM $table")"
    printf 'db_bytes\t%s\n' "$(cat "$DDB" "$DDB-wal" 2> /dev/null | wc -c)"
  } > "$OUT/drops/result.tsv"
fi

# ---------- 3. store: request rows per second through batched writes ----------
if [ "$STORE_ROWS" -gt 0 ]; then
  say "store: $STORE_ROWS request rows through Store::write_batch"
  taskset -c "$SCPU" "$STORE" --rows "$STORE_ROWS" > "$OUT/store/result.tsv"
fi

say "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'load_after\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/meta.tsv"
python3 bench/report.py "$OUT" | tee "$OUT/results.md"
