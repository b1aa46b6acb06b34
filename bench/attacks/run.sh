#!/usr/bin/env bash
# Runs every attack against a release `exitvoice serve` on loopback, one fresh server per attack:
# a baseline rate of the legitimate client first, then the attack with the client side by side.
# Samples the server's peak RSS (VmHWM) and prints the results table (markdown).
#
# Usage: bench/attacks/run.sh [attack ...]      (default: all)
#   SECONDS_PER_ATTACK=10  how long each attack (and the measurement beside it) runs
#   PORT=18443             the port used on 127.0.0.1
# Needs root only for nothing; raises `ulimit -n` for the idle-connections attack.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
SECS="${SECONDS_PER_ATTACK:-10}"
PORT="${PORT:-18443}"
ADDR="127.0.0.1:$PORT"
cargo build --release --quiet --bin exitvoice -p exitvoice
cargo build --release --quiet --bin attack -p exitvoice-attacks
BIN="$CARGO_TARGET_DIR/release/exitvoice"
ATTACK="$CARGO_TARGET_DIR/release/attack"
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# name | attack flags | extra server flags. Every attacker reconnects when the server closes its
# connection, except with --once (then the row measures the attack itself, not the reconnection
# flood of TLS handshakes it turns into).
PLAN=(
  "slow-hello|--connections 60 --count 100000 --interval-ms 500|"
  "slow-preface|--connections 60 --count 100000 --interval-ms 500|"
  "slow-headers|--connections 60 --count 100000 --interval-ms 500|"
  "big-hello|--connections 8 --count 100000|"
  "priority|--connections 4 --count 10000|"
  "settings|--connections 4 --count 10000|"
  "continuation|--connections 4 --count 10000 --once|"
  "continuation|--connections 4 --count 10000|"
  "hpack-bomb|--connections 4 --count 1000 --once|"
  "hpack-bomb|--connections 4 --count 1000|"
  "rapid-reset|--connections 4 --count 100000 --once|"
  "rapid-reset|--connections 4 --count 100000|"
  "idle|--connections 10000 --sources 200|--max-connections 12000"
)
WANT=("$@")

start_server() {
  rm -f "$WORK"/echo.db*
  # shellcheck disable=SC2086
  "$BIN" serve --listen "$ADDR" --db "$WORK/echo.db" $1 >"$WORK/out.log" 2>"$WORK/err.log" &
  SERVER=$!
  for _ in $(seq 100); do
    grep -q "certificate pin" "$WORK/out.log" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "server did not start" >&2; cat "$WORK/err.log" >&2; exit 1
}

stop_server() {
  kill -TERM "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
}

hwm_kib() { awk '/VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

field() { python3 -c "import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ''))" "$1" "$2"; }

echo "| attack | parameters | server up? | peak RSS (MiB) | baseline RSS (MiB) | legit rate (req/s) | baseline before / after (req/s) | % of mean baseline | attack figures | admission |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for entry in "${PLAN[@]}"; do
  IFS='|' read -r name flags server_flags <<<"$entry"
  if [ "${#WANT[@]}" -gt 0 ] && [[ ! " ${WANT[*]} " == *" $name "* ]]; then continue; fi
  start_server "$server_flags"
  base="$("$ATTACK" baseline --addr "$ADDR" --seconds "$((SECS * 3 / 5))")"
  base_hwm="$(hwm_kib "$SERVER")"
  # shellcheck disable=SC2086
  result="$("$ATTACK" "$name" --addr "$ADDR" --seconds "$SECS" $flags)"
  up="yes"
  kill -0 "$SERVER" 2>/dev/null || up="NO"
  hwm="$(hwm_kib "$SERVER")"
  # The baseline again after the attack: the server must still answer, and the mean of the two
  # baselines cancels part of the drift of the other load on the machine.
  after="$("$ATTACK" baseline --addr "$ADDR" --seconds "$((SECS * 3 / 5))")"
  [ "$(field "$after" legit_ok)" -gt 0 ] || up="no answer"
  # What admission did (asked from an address no attacker uses): connections reset for the rate
  # limit / the penalty box, strikes counted, penalties given.
  admission="$(curl -sk --max-time 5 --interface 127.0.2.1 "https://$ADDR/healthz" | python3 -c '
import json, sys
c = json.load(sys.stdin)["connections"]
keys = ("rejected_rate", "rejected_penalty", "strikes", "penalties")
print("reset: rate %s, penalty %s; strikes %s, penalties %s" % tuple(c[k] for k in keys))' 2>/dev/null || echo "healthz unavailable")"
  stop_server
  rate="$(field "$result" legit_rate)"
  before_rate="$(field "$base" legit_rate)"
  after_rate="$(field "$after" legit_rate)"
  base_rate="$(python3 -c "print(f'{(float($before_rate)+float($after_rate))/2:.1f}')")"
  pct="$(python3 -c "print(f'{100*float($rate)/max(float($base_rate),1e-9):.0f}')")"
  printf '| %s | `%s` %s | %s | %.1f | %.1f | %.1f | %.1f / %.1f | %s %% | connected %s, failed %s, sent %s, closed by server %s; legit failures %s | %s |\n' \
    "$name" "$flags" "$server_flags" "$up" "$(echo "$hwm/1024" | bc -l)" "$(echo "$base_hwm/1024" | bc -l)" \
    "$rate" "$before_rate" "$after_rate" "$pct" \
    "$(field "$result" connected)" "$(field "$result" failed)" "$(field "$result" sent)" \
    "$(field "$result" closed_by_server)" "$(field "$result" legit_failed)" "$admission"
done
