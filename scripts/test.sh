#!/usr/bin/env bash
# The one test command (README.md): installs what the tests need, then format, lint and tests
# (--no-fail-fast: every failing test binary shows, not only the first).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --all-targets --no-fail-fast
