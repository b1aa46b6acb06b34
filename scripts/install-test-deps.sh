#!/usr/bin/env bash
# Installs everything the test suite needs, idempotently: Debian packages (real clients, proxies,
# tshark) and a Python venv with the reference decoders and HTTP clients. Safe to run again: each
# step is a fast no-op when its tool is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
APT_PACKAGES=(
  ca-certificates curl openssl iproute2 procps
  tshark
  chromium firefox-esr nghttp2-client golang-go
  squid apache2-utils tinyproxy dante-server haproxy
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-test-deps: apt installing ${missing[*]}"
  apt-get -o DPkg::Lock::Timeout=900 update -q
  apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}"
fi

# Python: reference decoders (hyperframe/hpack) and the client libraries the tests drive.
VENV=.tools/venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY_PACKAGES=(h2 hpack hyperframe 'httpx[http2]' requests aiohttp)
if ! "$VENV/bin/python" -c 'import h2, hpack, hyperframe, httpx, requests, aiohttp' 2>/dev/null; then
  "$VENV/bin/pip" install -q "${PY_PACKAGES[@]}"
fi
echo "install-test-deps: ok"
