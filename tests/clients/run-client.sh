#!/usr/bin/env bash
# Runs one real client once against an HTTPS URL, the way captures/ were recorded.
#
#   tests/clients/run-client.sh CLIENT URL             run it (one connection with a request;
#                                                      browsers may open a second, unused one)
#   tests/clients/run-client.sh --command CLIENT URL   print the exact command
#   tests/clients/run-client.sh --version CLIENT       print the client's version, as it reports it
#   tests/clients/run-client.sh --list                 print the client names
#
# The URL's host should be a name (echo.exitvoice.test, mapped to 127.0.0.1 by
# scripts/install-test-deps.sh) so clients send SNI. Trust: the non-browser clients are given
# $CA (default .tools/certs/ca.pem); Chromium runs with --ignore-certificate-errors; Firefox trusts
# the CA through the enterprise policy installed by scripts/install-test-deps.sh.
# Output: the client's stdout (the response body for most clients; Chromium prints the DOM).
# Exit status: the client's (124 when it ran out of time). Each run of a browser gets a fresh,
# empty profile directory. $CLIENT_TIMEOUT (seconds, default 90) bounds one run: the client's
# process group gets SIGTERM then, and SIGKILL 5 s later. Profiles are made under
# $PROFILE_ROOT (default /tmp).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CA=${CA:-$ROOT/.tools/certs/ca.pem}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-90}
PY=$ROOT/.tools/venv/bin/python
CLIENTS=(chromium firefox-esr curl-h2 curl-h1 go-h2 go-h1 java-httpclient node-https node-http2
  python-httpx-h2 python-requests python-aiohttp openssl-s_client nghttp)

pyver() { "$PY" -c "import importlib.metadata as m, platform; print('Python', platform.python_version(), ' '.join(p + ' ' + m.version(p) for p in '$*'.split()))"; }

version() {
  case $1 in
    chromium) chromium --version 2>/dev/null | tail -1 ;;
    firefox-esr) firefox-esr --version 2>/dev/null | tail -1 ;;
    curl-*) curl --version | head -1 ;;
    go-*) go version ;;
    java-*) java -version 2>&1 | head -1 ;;
    node-*) echo "node $(node --version) (OpenSSL $(node -p process.versions.openssl), nghttp2 $(node -p process.versions.nghttp2))" ;;
    python-httpx-h2) pyver httpx httpcore h2 ;;
    python-requests) pyver requests urllib3 ;;
    python-aiohttp) pyver aiohttp ;;
    openssl-s_client) openssl version ;;
    nghttp) nghttp --version ;;
    *) return 1 ;;
  esac
}

# The command; {profile} stands for a fresh directory made for each run.
command_of() {
  local url=$2 hostport
  hostport=${url#https://}
  hostport=${hostport%%/*}
  case $1 in
    chromium) echo "chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update --disable-sync --ignore-certificate-errors --user-data-dir={profile} --dump-dom $url" ;;
    firefox-esr) echo "firefox-esr --headless --no-remote --profile {profile} --screenshot {profile}/shot.png $url" ;;
    curl-h2) echo "curl -sS --http2 --cacert $CA $url" ;;
    curl-h1) echo "curl -sS --http1.1 --cacert $CA $url" ;;
    go-h2) echo "$ROOT/.tools/bin/goclient $url $CA" ;;
    go-h1) echo "$ROOT/.tools/bin/goclient $url $CA h1" ;;
    java-httpclient) echo "java $ROOT/tests/clients/JavaClient.java $url $CA" ;;
    node-https) echo "node $ROOT/tests/clients/node_https.js $url $CA" ;;
    node-http2) echo "node $ROOT/tests/clients/node_http2.js $url $CA" ;;
    python-httpx-h2) echo "$PY $ROOT/tests/clients/py_httpx.py $url $CA" ;;
    python-requests) echo "$PY $ROOT/tests/clients/py_requests.py $url $CA" ;;
    python-aiohttp) echo "$PY $ROOT/tests/clients/py_aiohttp.py $url $CA" ;;
    # The request is written on stdin: GET <the URL's path> HTTP/1.1, Host, Connection: close.
    openssl-s_client) echo "openssl s_client -quiet -connect $hostport -servername ${hostport%:*} -CAfile $CA" ;;
    nghttp) echo "nghttp $url" ;;
    *) return 1 ;;
  esac
}

case ${1:-} in
  --list) printf '%s\n' "${CLIENTS[@]}"; exit 0 ;;
  --version) version "$2" || { echo "unknown client $2" >&2; exit 2; }; exit 0 ;;
  --command) command_of "$2" "$3" || { echo "unknown client $2" >&2; exit 2; }; exit 0 ;;
esac
[ $# -eq 2 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
name=$1 url=$2
cmd=$(command_of "$name" "$url") || { echo "unknown client $name" >&2; exit 2; }
profile=$(mktemp -d "${PROFILE_ROOT:-/tmp}/exitvoice-client.XXXXXX")
trap 'rm -rf "$profile"' EXIT
cmd=${cmd//\{profile\}/$profile}
case $name in
  firefox-esr) cp "$ROOT/tests/clients/firefox-user.js" "$profile/user.js" ;;
  openssl-s_client)
    hostport=${url#https://}; path=/
    case $hostport in */*) path=/${hostport#*/} ;; esac
    hostport=${hostport%%/*}
    printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$path" "$hostport" |
      timeout -k 5 "$CLIENT_TIMEOUT" $cmd
    exit ;;
esac
timeout -k 5 "$CLIENT_TIMEOUT" $cmd </dev/null
