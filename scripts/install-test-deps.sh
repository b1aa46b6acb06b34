#!/usr/bin/env bash
# Installs everything the test suite needs, idempotently, on Debian 12 (bookworm) as root:
#   - Debian packages: the real clients (Chromium, Firefox ESR, curl, nghttp, Go, openssl),
#     the real proxies, tshark/editcap, NSS tools, Prometheus (scrapes the echo's metrics; its
#     packaged service is not started: the tests run their own instance), systemd (its
#     systemd-analyze checks the deploy/ units), pebble (a throwaway ACME CA), redis-server
#     (store/redistest runs its own servers from its binary; the packaged daemon is stopped),
#     mmdblookup (mmdb-bin: the independent reader of the geo tests), p0f (the independent
#     reader of SYNs: `p0f -r` on the SYN tests' captures), lintian (judges the Debian package),
#     buildah, podman and runc (build and run the OCI image; podman's own crun refuses this
#     machine's cgroup layout, so the tests run it with runc), man-db (renders the packaged man
#     pages), binutils (strip and readelf: the image's binary and the libraries it names);
#   - cargo-deb (from crates.io, pinned): makes the Debian package (scripts/package.sh);
#   - .tools/venv: reference decoders (h2, hpack, hyperframe, ja4plus) and Python HTTP clients
#     (aioquic: the independent QUIC/HTTP/3 client of tests/echo_quic.rs), and mmdb-writer (the
#     geo tests' MaxMind DB files, written at test time);
#   - .tools/venv-mitm: mitmproxy (11.x on Python 3.11), kept apart from the test venv;
#   - .tools/venv-scrapy: Scrapy (a crawler whose downloader pools CONNECT tunnels: the broker's
#     proxy tests), kept apart so that its dependencies move no pin of the test venv;
#   - examples/proxy/crawlee/node_modules: the crawlee example's packages, as its lock file pins
#     them (`npm ci`; tests/broker_proxy_examples.rs runs it);
#   - .tools/certs/: a test CA and a leaf certificate for echo.exitvoice.test (made once);
#   - the Firefox enterprise policy that trusts that CA (merged into any existing policy);
#   - the /etc/hosts line `127.0.0.1 echo.exitvoice.test`;
#   - .tools/bin/goclient: the Go net/http client of tests/clients (stdlib only, no downloads).
# Each step is a fast no-op when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=900)

say() { echo "install-test-deps: $*"; }

# --- Debian packages --------------------------------------------------------------------------
APT_PACKAGES=(
  ca-certificates curl wget openssl iproute2 procps e2fsprogs
  python3 python3-venv
  tshark libnss3-tools sqlite3
  chromium firefox-esr nghttp2-client golang-go
  squid apache2-utils tinyproxy dante-server haproxy
  prometheus systemd pebble postgresql redis-server
  mmdb-bin p0f
  lintian buildah podman runc man-db binutils
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "apt installing ${missing[*]}"
  "${APT[@]}" update -q
  "${APT[@]}" install -y -q --no-install-recommends "${missing[@]}"
fi
# Where an init system lets it, installing redis-server starts Debian's daemon on port 6379. The
# tests never use it (store/redistest starts servers of its own on free ports), so a daemon that
# this install started is stopped and not started again at boot. Only right after installing:
# a Redis someone runs on purpose is left alone on later runs.
if [[ " ${missing[*]} " == *" redis-server "* ]]; then
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl disable --now redis-server >/dev/null 2>&1 || true
  fi
  redis-cli -p 6379 shutdown nosave >/dev/null 2>&1 || true
fi
# Java (HttpClient, source launch) and node: preinstalled on the project's machines (JDK 17,
# node 20); on a bare Debian 12 fall back to the distribution's (JDK 17, node 18).
extra=()
command -v java >/dev/null || extra+=(openjdk-17-jdk-headless)
command -v node >/dev/null || extra+=(nodejs)
command -v npm >/dev/null || extra+=(npm)
if [ ${#extra[@]} -gt 0 ]; then
  say "apt installing ${extra[*]}"
  "${APT[@]}" update -q
  "${APT[@]}" install -y -q --no-install-recommends "${extra[@]}"
fi

# Debian's own Python 3.11 for the venvs (a pyenv python earlier on PATH would differ per machine).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

# --- Python venv for the tests ------------------------------------------------------------------
VENV=.tools/venv
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PY" -m venv "$VENV"
fi
# Pinned: the Python clients are the ones captures/python-* were recorded with (echo_clients
# fails when a client's version differs from its recording), and the reference decoders are the
# versions the expected values were computed with. A new PyPI release must not change either.
PY_PACKAGES=(
  h2==4.4.1 hpack==4.2.0 hyperframe==6.1.0 ja4plus==1.4.0
  httpx==0.28.1 httpcore==1.0.9 socksio==1.0.0 requests==2.34.2 urllib3==2.8.0 aiohttp==3.14.5
  aioquic==1.7.2
  mmdb-writer==0.2.7
)
pinned_missing() {
  # Every pin `name==version` must appear in `pip freeze` (names compared case-insensitively).
  local have
  have=$("$1/bin/pip" freeze 2>/dev/null | tr 'A-Z_' 'a-z-')
  shift
  for pin in "$@"; do
    grep -qx "$(echo "$pin" | tr 'A-Z_' 'a-z-')" <<<"$have" || return 0
  done
  return 1
}
if pinned_missing "$VENV" "${PY_PACKAGES[@]}"; then
  say "pip installing ${PY_PACKAGES[*]} into $VENV"
  "$VENV/bin/pip" install -q "${PY_PACKAGES[@]}"
fi

# --- mitmproxy in its own venv (auditor tests) ---------------------------------------------------
MVENV=.tools/venv-mitm
MITM_PIN=mitmproxy==11.0.2
if [ ! -x "$MVENV/bin/mitmdump" ] || pinned_missing "$MVENV" "$MITM_PIN"; then
  say "installing $MITM_PIN into $MVENV"
  [ -x "$MVENV/bin/python" ] || "$PY" -m venv "$MVENV"
  "$MVENV/bin/pip" install -q "$MITM_PIN"
fi

# --- Scrapy in its own venv (the broker's proxy tests) ------------------------------------------
SVENV=.tools/venv-scrapy
SCRAPY_PIN=Scrapy==2.19.0
if [ ! -x "$SVENV/bin/scrapy" ] || pinned_missing "$SVENV" "$SCRAPY_PIN"; then
  say "installing $SCRAPY_PIN into $SVENV"
  [ -x "$SVENV/bin/python" ] || "$PY" -m venv "$SVENV"
  "$SVENV/bin/pip" install -q "$SCRAPY_PIN"
fi

# --- the crawlee example's packages (examples/proxy/crawlee) ----------------------------------
# `npm ci` installs exactly what package-lock.json pins; npm writes its own record of the install
# (node_modules/.package-lock.json), so a lock file newer than that record installs again.
CRAWLEE=examples/proxy/crawlee
if [ ! -f "$CRAWLEE/node_modules/.package-lock.json" ] ||
   [ "$CRAWLEE/package-lock.json" -nt "$CRAWLEE/node_modules/.package-lock.json" ]; then
  say "npm ci in $CRAWLEE"
  (cd "$CRAWLEE" && npm ci --no-audit --no-fund --loglevel=error)
fi

# --- test CA + leaf certificate (made once) ------------------------------------------------------
CERTS=.tools/certs
if [ ! -s "$CERTS/leaf-chain.pem" ] || [ ! -s "$CERTS/leaf.key" ] || [ ! -s "$CERTS/ca.pem" ]; then
  say "making test CA and leaf certificate in $CERTS"
  mkdir -p "$CERTS"
  (
    cd "$CERTS"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 \
      -subj "/CN=exitvoice Test CA" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout leaf.key -out leaf.csr \
      -subj "/CN=echo.exitvoice.test" 2>/dev/null
    printf '%s\n' "subjectAltName=DNS:echo.exitvoice.test,DNS:localhost,IP:127.0.0.1" \
      "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" > leaf.ext
    openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem \
      -days 825 -extfile leaf.ext 2>/dev/null
    cat leaf.pem ca.pem > leaf-chain.pem
    rm -f leaf.csr leaf.ext ca.srl
  )
fi

# --- Firefox enterprise policy trusting the test CA ---------------------------------------------
# Merged into the existing policy file, so other checkouts' CAs (other worktrees) keep working.
FF_POLICY_DIR=${FIREFOX_POLICY_DIR:-/etc/firefox/policies}
"$PY" - "$FF_POLICY_DIR/policies.json" "$ROOT/$CERTS/ca.pem" <<'PYEOF'
import json, os, sys
path, ca = sys.argv[1], sys.argv[2]
try:
    with open(path) as f:
        doc = json.load(f)
except (FileNotFoundError, ValueError):
    doc = {}
pol = doc.setdefault("policies", {})
want = {"DisableAppUpdate": True, "DisableTelemetry": True, "DisableFirefoxStudies": True,
        "DontCheckDefaultBrowser": True, "CaptivePortal": False, "NetworkPrediction": False}
changed = False
for k, v in want.items():
    if pol.get(k) != v:
        pol[k] = v
        changed = True
inst = pol.setdefault("Certificates", {}).setdefault("Install", [])
if ca not in inst:
    inst.append(ca)
    changed = True
if changed:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(path + ".tmp", path)
    print(f"install-test-deps: firefox policy {path} trusts {ca}")
PYEOF

# --- /etc/hosts: the test origin's name (clients send SNI only for names) -----------------------
if ! grep -Eq '^127\.0\.0\.1[[:space:]].*\becho\.exitvoice\.test\b' /etc/hosts; then
  say "adding echo.exitvoice.test to /etc/hosts"
  echo '127.0.0.1 echo.exitvoice.test' >> /etc/hosts
fi

# --- Go client (stdlib only; never downloads modules) --------------------------------------------
GOBIN_OUT=.tools/bin/goclient
if [ ! -x "$GOBIN_OUT" ] || [ tests/clients/goclient.go -nt "$GOBIN_OUT" ]; then
  say "building $GOBIN_OUT"
  mkdir -p .tools/bin .tools/go/cache
  GOPATH="$ROOT/.tools/go" GOCACHE="$ROOT/.tools/go/cache" GOPROXY=off GOTOOLCHAIN=local \
    GO111MODULE=off GOFLAGS= go build -o "$GOBIN_OUT" tests/clients/goclient.go
fi

# --- cargo-deb (scripts/package.sh) --------------------------------------------------------------
# Pinned: a newer release may refuse what this one warns about (packaging a dev build, which the
# tests do to package the build they already have).
CARGO_DEB_VERSION=3.8.0
if [ "$(cargo deb --version 2>/dev/null)" != "cargo-deb $CARGO_DEB_VERSION" ]; then
  say "cargo installing cargo-deb $CARGO_DEB_VERSION"
  cargo install --locked --quiet cargo-deb --version "$CARGO_DEB_VERSION"
fi

say "ok"
