#!/bin/sh
# curl through exitvoice's broker proxy, over HTTP CONNECT and then over SOCKS5.
#
#   EXITVOICE_PROXY=127.0.0.1:8491 EXITVOICE_BROKER_TOKEN=… examples/proxy/curl.sh URL [TASK]
#
# The proxy user name is the lease request (`class-identity-task-t1`: an exit fit for identity,
# held for task t1; EXITVOICE_CLASS=anonymous or stateless asks for less), the password the
# broker token. Both fetches name the same task, so the second rides the first one's lease and
# leaves from the same exit (within the broker's --task-idle of the first). curl's own
# environment applies (CURL_CA_BUNDLE for a private CA). The token is on curl's command line,
# which other users of this machine see in `ps`: a curl config file (`--config`,
# `proxy-user = "…"`) keeps it off.
set -eu
url=${1:?usage: curl.sh URL [TASK]}
task=${2:-t1}
proxy=${EXITVOICE_PROXY:?EXITVOICE_PROXY: host:port of the broker proxy}
token=${EXITVOICE_BROKER_TOKEN:?EXITVOICE_BROKER_TOKEN: the broker token}
user="class-${EXITVOICE_CLASS:-identity}-task-$task"

# HTTP CONNECT: curl asks the proxy for a tunnel to the URL's host and speaks TLS through it.
curl -sS --fail -x "http://$user:$token@$proxy" "$url"
echo
# SOCKS5 with the name resolved by the exit (socks5h, not socks5): the same task, the same exit.
curl -sS --fail -x "socks5h://$user:$token@$proxy" "$url"
echo
