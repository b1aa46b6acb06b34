#!/usr/bin/env bash
# Builds the OCI image of exitvoice with buildah (scripts/install-test-deps.sh installs it),
# from `scratch`: no base image is pulled. It holds the binary (stripped), exactly the shared
# libraries the binary links as the dynamic loader resolves them (`ldd`, the loader included),
# the CA certificates, a non-root user `exitvoice` (uid and gid 10001) and /data, the volume
# for the SQLite database and the generated certificate (the working directory). Default
# command `exitvoice serve`, on 0.0.0.0:8443 (TCP, and UDP for QUIC). As root (buildah mount).
#
#   scripts/image.sh                             a release build, then its image
#   scripts/image.sh --profile dev --no-build    the debug build already there (the tests')
#
# Options: --profile NAME (default release), --no-build, --tag NAME (default
# localhost/exitvoice:<version>). The last line printed is the image's name.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=release
BUILD=1
TAG=
while [ $# -gt 0 ]; do
  case $1 in
    --profile) PROFILE=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --tag) TAG=$2; shift 2 ;;
    *) echo "image.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case $PROFILE in
  dev | test) DIR=debug ;;
  bench) DIR=release ;;
  *) DIR=$PROFILE ;;
esac
if [ "$BUILD" = 1 ]; then
  cargo build --profile "$PROFILE" --bin exitvoice
fi
BIN=${CARGO_TARGET_DIR:-target}/$DIR/exitvoice
[ -x "$BIN" ] || { echo "image.sh: no $BIN (build it, or leave out --no-build)" >&2; exit 1; }
read -r _ VERSION _ COMMIT < <("$BIN" --version)
COMMIT=${COMMIT%)}
TAG=${TAG:-localhost/exitvoice:$VERSION}
SOURCE=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml)
LICENSE=$(sed -n 's/^license = "\(.*\)"$/\1/p' Cargo.toml)

STAGE=$(mktemp -d /tmp/exitvoice-image.XXXXXX)
CTR=
cleanup() {
  [ -z "$CTR" ] || buildah rm "$CTR" >/dev/null 2>&1 || true
  rm -rf "$STAGE"
}
trap cleanup EXIT
ROOT=$STAGE/root
install -d -m 0755 "$ROOT/usr/bin" "$ROOT/etc/ssl/certs"
strip -o "$ROOT/usr/bin/exitvoice" "$BIN"

# Each library at the path the loader found it at: `name => /path (addr)`, and the loader
# itself as a bare `/path (addr)`; the vDSO lives in the kernel.
ldd "$BIN" | while read -r first arrow path _; do
  if [ "$arrow" = "=>" ]; then
    lib=$path
  else
    lib=$first
  fi
  case $lib in
    /*) install -D -m 0755 "$(readlink -f "$lib")" "$ROOT$lib" ;;
  esac
done

install -m 0644 /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/"
printf 'exitvoice:x:10001:10001:exitvoice:/data:/usr/sbin/nologin\n' > "$ROOT/etc/passwd"
printf 'exitvoice:x:10001:\n' > "$ROOT/etc/group"
chmod 0644 "$ROOT/etc/passwd" "$ROOT/etc/group"
install -d -m 0700 -o 10001 -g 10001 "$ROOT/data"

CTR=$(buildah from scratch)
MNT=$(buildah mount "$CTR")
cp -a "$ROOT/." "$MNT/"
buildah umount "$CTR" >/dev/null
buildah config \
  --entrypoint '["/usr/bin/exitvoice"]' --cmd serve \
  --env EXITVOICE_LISTEN=0.0.0.0:8443 \
  --user 10001:10001 --workingdir /data --volume /data \
  --port 8443/tcp --port 8443/udp \
  --label org.opencontainers.image.title=exitvoice \
  --label "org.opencontainers.image.description=$(sed -n 's/^description = "\(.*\)"$/\1/p' Cargo.toml)" \
  --label "org.opencontainers.image.source=$SOURCE" \
  --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.revision=$COMMIT" \
  --label "org.opencontainers.image.licenses=$LICENSE" \
  "$CTR"
buildah commit --quiet --rm "$CTR" "$TAG" >/dev/null
CTR=
echo "$TAG"
