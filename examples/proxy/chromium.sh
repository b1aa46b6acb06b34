#!/bin/sh
# Headless Chromium through exitvoice's broker proxy. A browser sends no proxy credentials (and
# answers no 407), so it gets a listener of its own whose lease is fixed, on loopback only:
#
#   exitvoice broker … --proxy-listen 127.0.0.1:8492=class-anonymous-task-browser
#   EXITVOICE_BROWSER_PROXY=127.0.0.1:8492 examples/proxy/chromium.sh URL [CHROMIUM FLAGS…]
#
# Every connection of the browser then rides task `browser`'s one lease: one exit. Prints the
# page's DOM once loaded.
url=${1:?usage: chromium.sh URL [CHROMIUM FLAGS...]}; shift
exec chromium --headless --proxy-server="http://${EXITVOICE_BROWSER_PROXY:-127.0.0.1:8492}" \
  "$@" --dump-dom "$url"
