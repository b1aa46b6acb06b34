#!/usr/bin/env bash
# Records captures/ with the real clients installed on this machine (see captures/README.md).
#
#   scripts/record-captures.sh                 # every client
#   scripts/record-captures.sh curl-h2 nghttp  # only these
#
# Each client is recorded by tests/tools/record-client.sh (the same piece tests/echo_clients.rs
# uses when an installed client is not the recorded one) on 127.0.0.1:$PORT (default 18650):
# two runs against https://echo.exitvoice.test:$PORT/ served by tests/tools/record.py, tshark on
# lo with the TLS secrets embedded, the provenance in captures/<client>/capture.json, and the
# expected values added by tests/tools/expect.py. A client that fails is reported and left as it
# was; the exit status is 1 when any failed.
# Needs root (tshark on lo): run scripts/install-test-deps.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-18650}
if [ $# -gt 0 ]; then CLIENTS=("$@"); else mapfile -t CLIENTS < <(tests/clients/run-client.sh --list); fi

failed=()
for name in "${CLIENTS[@]}"; do
  echo "== $name: $(tests/clients/run-client.sh --version "$name")"
  work=$(mktemp -d "${TMPDIR:-/tmp}/record-captures.XXXXXX")
  # Recorded aside first, so a failed recording leaves the stored capture untouched.
  if tests/tools/record-client.sh --port "$PORT" "$name" "$work/$name"; then
    rm -rf "captures/$name"
    mv "$work/$name" "captures/$name"
    echo "   -> captures/$name"
  else
    echo "   FAILED: $name" >&2
    failed+=("$name")
  fi
  rm -rf "$work"
done
[ ${#failed[@]} -eq 0 ] || { echo "failed: ${failed[*]}" >&2; exit 1; }
