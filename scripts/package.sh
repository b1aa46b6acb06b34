#!/usr/bin/env bash
# Builds the Debian package of exitvoice (README.md, "Install") with cargo-deb
# (scripts/install-test-deps.sh installs it), from one build of the binary:
#
#   scripts/package.sh                             a release build, then its package
#   scripts/package.sh --profile dev --no-build    the debug build already there (the tests')
#
# Options: --profile NAME (default release), --no-build (package the binary as it is),
# --deb-version V (default: the binary's version, revision 1), --out DIR (default
# target/debian), --fast (lighter compression: a larger package, made sooner). The man pages, the completions and the changelog are written from the binary
# itself (`exitvoice generate`) into <target>/<profile>/package/, where Cargo.toml's
# [package.metadata.deb] takes them. The last line printed is the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=release
BUILD=1
DEB_VERSION=
FAST=()
OUT=${CARGO_TARGET_DIR:-target}/debian
while [ $# -gt 0 ]; do
  case $1 in
    --profile) PROFILE=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --deb-version) DEB_VERSION=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --fast) FAST=(--fast); shift ;;
    *) echo "package.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# Cargo's folder for a profile: dev and test build into debug/, bench into release/.
case $PROFILE in
  dev | test) DIR=debug ;;
  bench) DIR=release ;;
  *) DIR=$PROFILE ;;
esac
if [ "$BUILD" = 1 ]; then
  cargo build --profile "$PROFILE" --bin exitvoice
fi
BIN=${CARGO_TARGET_DIR:-target}/$DIR/exitvoice
[ -x "$BIN" ] || { echo "package.sh: no $BIN (build it, or leave out --no-build)" >&2; exit 1; }

# "exitvoice 0.1.0 (commit 0123456789ab)": the version and commit the binary was built with.
read -r _ VERSION _ COMMIT < <("$BIN" --version)
COMMIT=${COMMIT%)}
DEB_VERSION=${DEB_VERSION:-$VERSION-1}

GEN=${CARGO_TARGET_DIR:-target}/$DIR/package
rm -rf "$GEN"
mkdir -p "$GEN/man" "$GEN/completions"
"$BIN" generate man --out "$GEN/man"
gzip -9n "$GEN"/man/*.1
"$BIN" generate completions bash > "$GEN/completions/exitvoice"
"$BIN" generate completions zsh > "$GEN/completions/_exitvoice"
"$BIN" generate completions fish > "$GEN/completions/exitvoice.fish"

# The changelog Debian wants beside every package: one entry naming the commit, dated by the
# commit (the same tree packs the same changelog), or now outside a git checkout.
MAINTAINER=$(sed -n 's/^maintainer = "\(.*\)"$/\1/p' Cargo.toml)
WHEN=$(git log -1 --format=%ct 2>/dev/null || date +%s)
printf 'exitvoice (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
  "$DEB_VERSION" "$COMMIT" "$MAINTAINER" "$(LC_ALL=C date -u -R -d "@$WHEN")" |
  gzip -9n > "$GEN/changelog.Debian.gz"

mkdir -p "$OUT"
# --strip: the package carries no debug info (a dev build's line tables weigh more than its code).
cargo deb --no-build --profile "$PROFILE" --strip --deb-version "$DEB_VERSION" --output "$OUT" "${FAST[@]}" |
  tail -n 1
