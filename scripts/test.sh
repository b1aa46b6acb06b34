#!/usr/bin/env bash
# The one test command (README.md): installs what the tests need, then format, lint and tests
# (--no-fail-fast: every failing test binary shows, not only the first).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
# Every test binary is built once here: incremental caches would only take disk (README.md).
export CARGO_INCREMENTAL=0
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# No import circle between the workspace's files (derived from `use` and `mod`): the check's own
# cases first, then the workspace.
scripts/import-circles.py --self-test
scripts/import-circles.py
cargo test --workspace --all-targets --no-fail-fast
# A smoke run of the benchmark harness on dev binaries (it builds the four it runs; `cargo test`
# does not build other packages' executables): it checks that the harness works end to end and
# asserts no speed (figures: docs/benchmarks.md). `--compare` with the same binary runs its
# two-build path too, `--floor store` the floor's.
scripts/bench.sh --quick --debug --compare "${CARGO_TARGET_DIR:-target}/debug/exitvoice" --floor store \
  --out "$(mktemp -d /tmp/exitvoice-bench-smoke.XXXXXX)"
# And the per-thread harness on the binaries that run built: one short HTTP/1.1 round, the
# second build path with the same binary; it fails when a request fails.
bench/per-thread.sh --debug --rounds 1 --requests 3000 --h1 \
  --compare "${CARGO_TARGET_DIR:-target}/debug/exitvoice"
# The same for the audit-scale harness: 200 simulated exits, on SQLite and on a throwaway
# PostgreSQL cluster; it fails on any count that is off (probes stored, tunnels, tokens).
scripts/bench-audit-scale.sh --quick --debug --out "$(mktemp -d /tmp/exitvoice-scale-smoke.XXXXXX)"
scripts/bench-audit-scale.sh --quick --debug --no-build --postgres \
  --out "$(mktemp -d /tmp/exitvoice-scale-smoke.XXXXXX)"
# And for the broker's harness: 100 exits on SQLite, PostgreSQL and PostgreSQL without
# synchronous commits, 2 s each; it fails when a run completes no lease cycle.
scripts/bench-broker.sh --quick --debug --out "$(mktemp -d /tmp/exitvoice-broker-smoke.XXXXXX)"
# And for the proxy's harness: 50 tunnels per path, 50 MB through the broker and HAProxy, 200
# idle tunnels; it fails when a tunnel is refused or an idle one closes.
scripts/bench-proxy.sh --quick --debug --out "$(mktemp -d /tmp/exitvoice-proxy-smoke.XXXXXX)"
