#!/usr/bin/env bash
# Fuzz campaign over exitvoice's parsers of untrusted bytes (fuzz/, a cargo-fuzz crate).
#
#   scripts/fuzz.sh [TARGET...]           default: every target, one after the other
#
# Environment:
#   FUZZ_RUNS=10000000   executions per target (libFuzzer -runs)
#   FUZZ_SECONDS=1800    wall-time cap per target (-max_total_time), whichever comes first
#   FUZZ_SANITIZER=none  cargo-fuzz sanitizer (none | address); the crates forbid unsafe code,
#                        so `none` (about 2x faster) loses little; debug assertions stay on
#   FUZZ_NICE=19         nice level (the campaign shares the machine)
#   FUZZ_LOG_DIR=fuzz/target/logs
#
# Installs cargo-fuzz if missing (`cargo install cargo-fuzz --locked`). Builds with the
# nightly toolchain (`cargo +nightly fuzz`); without one, with stable and RUSTC_BOOTSTRAP=1.
# New corpus entries go to fuzz/target/corpus/<target> (gitignored); the seeds in
# fuzz/corpus/<target> are read, never written. Crashes land in fuzz/artifacts/<target>/.
# Prints one line per target: executions, exec/s, wall seconds, crashes, timeouts, OOMs, peak
# RSS; exits non-zero if any target crashed, timed out or ran out of memory.
set -uo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(client_hello h2_prefix h1_head pcap quic_initials h3_streams connect_reply socks5_reply exits_file tcp_syn)
RUNS=${FUZZ_RUNS:-10000000}
SECONDS_CAP=${FUZZ_SECONDS:-1800}
SANITIZER=${FUZZ_SANITIZER:-none}
NICE=${FUZZ_NICE:-19}
LOG_DIR=${FUZZ_LOG_DIR:-fuzz/target/logs}
# Longest input per target: above the largest seed, small enough to keep executions fast.
declare -A MAX_LEN=(
  [client_hello]=8192 [h2_prefix]=8192 [h1_head]=4096 [pcap]=16384 [quic_initials]=4096 [h3_streams]=4096
  [connect_reply]=17000 [socks5_reply]=512 [exits_file]=4096 [tcp_syn]=256
)

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked || exit 1
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  CARGO=(cargo +nightly)
else
  echo "no nightly toolchain: using stable with RUSTC_BOOTSTRAP=1" >&2
  export RUSTC_BOOTSTRAP=1
  CARGO=(cargo)
fi
unset CARGO_TARGET_DIR # the fuzz crate builds in fuzz/target

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${ALL_TARGETS[@]}")
mkdir -p "$LOG_DIR"

# One build of every target (a run rebuilds nothing after it).
nice -n "$NICE" "${CARGO[@]}" fuzz build -s "$SANITIZER" --debug-assertions \
  >"$LOG_DIR/build.log" 2>&1 || { tail -30 "$LOG_DIR/build.log"; exit 1; }

status=0
printf '%-14s %12s %9s %7s %7s %8s %5s %8s\n' target executions exec/s wall_s crashes timeouts ooms rss_mb
for t in "${targets[@]}"; do
  work="fuzz/target/corpus/$t"
  mkdir -p "$work" "fuzz/artifacts/$t"
  log="$LOG_DIR/$t.log"
  start=$(date +%s)
  nice -n "$NICE" "${CARGO[@]}" fuzz run -s "$SANITIZER" --debug-assertions "$t" "$work" "fuzz/corpus/$t" -- \
    -runs="$RUNS" -max_total_time="$SECONDS_CAP" -max_len="${MAX_LEN[$t]}" \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/$t/" >"$log" 2>&1
  rc=$?
  wall=$(($(date +%s) - start))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  crashes=$(grep -c -E 'ERROR: libFuzzer: deadly signal|ERROR: AddressSanitizer' "$log")
  timeouts=$(grep -c 'ERROR: libFuzzer: timeout' "$log")
  ooms=$(grep -c -E 'ERROR: libFuzzer: out-of-memory|ERROR: libFuzzer: malloc' "$log")
  printf '%-14s %12s %9s %7s %7s %8s %5s %8s\n' "$t" "${execs:-?}" "${speed:-?}" "$wall" \
    "$crashes" "$timeouts" "$ooms" "${rss:-?}"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ] || [ "$timeouts" -ne 0 ] || [ "$ooms" -ne 0 ]; then
    echo "  $t: exit $rc, see $log and fuzz/artifacts/$t/" >&2
    status=1
  fi
done
exit $status
