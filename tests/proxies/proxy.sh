#!/usr/bin/env bash
# Starts and stops one real proxy on loopback for the auditor's tests.
# Adapted from the exitvoice zoo scripts (start_*.sh / proxies/common.sh): same packaged daemons,
# but every instance gets its own run directory and port, so tests can run side by side.
#
#   proxy.sh start squid     DIR PORT USER PASS      # HTTP CONNECT, Basic auth (htpasswd)
#   proxy.sh start tinyproxy DIR PORT [USER PASS]    # HTTP CONNECT, optional BasicAuth
#   proxy.sh start dante     DIR PORT USER PASS [udp|udp-noreply]  # SOCKS5, RFC 1929 (system
#                            account USER); udp also grants UDP ASSOCIATE, udp-noreply grants the
#                            association but relays no reply (a relay whose UDP goes nowhere)
#   proxy.sh start mitmproxy DIR PORT [MITMDUMP_ARGS…]  # intercepting proxy (mitmdump)
#   proxy.sh start haproxy   DIR PORT BACKEND_PORT…  # TCP round robin over the backends
#   proxy.sh start haproxy-tls DIR PORT PEM BACKEND_PORT  # TLS (cert+key PEM) in front of a backend
#   proxy.sh start haproxy-pp DIR PORT send-proxy|send-proxy-v2 BACKEND_PORT  # TCP, PROXY header
#   proxy.sh start haproxy-failover DIR PORT PRIMARY_PORT BACKUP_PORT  # TCP to the primary while
#                            its health check passes, else to the backup; sessions to a server
#                            marked down are cut (a managed database's endpoint)
#   proxy.sh stop DIR NAME                           # TERM (then KILL) exactly the started PID
#
# Needs root (squid/tinyproxy user switch, dante's account) and the packages squid,
# apache2-utils, tinyproxy, dante-server, haproxy; mitmproxy from the venv .tools/venv-mitm
# (or MITMDUMP=/path/to/mitmdump). Listens on and connects to 127.0.0.1 only.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

wait_listen() {  # wait_listen NAME PORT DIR
  # Only the started process listening counts: another test's daemon that took the port in the
  # meantime is not ours (the caller then retries with another port).
  local name="$1" port="$2" dir="$3" pid
  pid="$(cat "$dir/$name.pid")"
  for _ in $(seq 1 100); do
    if ss -ltnpH "sport = :$port" | grep -q "pid=$pid,"; then echo "$pid"; return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  echo "$name failed to listen on 127.0.0.1:$port; output:" >&2
  tail -30 "$dir/$name.out" >&2 || true
  return 1
}

start_bg() {  # start_bg NAME DIR CMD…
  local name="$1" dir="$2"; shift 2
  nohup "$@" >"$dir/$name.out" 2>&1 &
  echo $! >"$dir/$name.pid"
}

cmd="$1"; shift
case "$cmd" in
start)
  kind="$1" dir="$2" port="$3"; shift 3
  mkdir -p "$dir"
  case "$kind" in
  squid)
    user="$1" pass="$2"
    htpasswd -bcm "$dir/htpasswd" "$user" "$pass" >/dev/null 2>&1
    cat >"$dir/squid.conf" <<CONF
http_port 127.0.0.1:$port
visible_hostname exitvoice-test-squid
cache_effective_user proxy
pid_filename $dir/squid-internal.pid
access_log stdio:$dir/access.log
cache_log $dir/cache.log
cache_store_log none
coredump_dir $dir
cache deny all
cache_mem 8 MB
shutdown_lifetime 1 seconds
auth_param basic program /usr/lib/squid/basic_ncsa_auth $dir/htpasswd
auth_param basic children 2 startup=1 idle=1
auth_param basic realm exitvoice-test
acl authed proxy_auth REQUIRED
http_access allow authed
http_access deny all
CONF
    chown -R proxy:proxy "$dir"
    start_bg squid "$dir" squid -N -f "$dir/squid.conf"
    wait_listen squid "$port" "$dir"
    ;;
  tinyproxy)
    {
      echo "User nobody"; echo "Group nogroup"; echo "Port $port"; echo "Listen 127.0.0.1"
      echo "Timeout 600"; echo "LogLevel Info"; echo "MaxClients 50"; echo "Allow 127.0.0.1"
      echo "DisableViaHeader Yes"
      if [ $# -ge 2 ]; then echo "BasicAuth $1 $2"; fi
    } >"$dir/tinyproxy.conf"
    chmod 755 "$dir"; chmod 644 "$dir/tinyproxy.conf"
    start_bg tinyproxy "$dir" tinyproxy -d -c "$dir/tinyproxy.conf"
    wait_listen tinyproxy "$port" "$dir"
    ;;
  dante)
    user="$1" pass="$2" commands="connect"
    # UDP ASSOCIATE (RFC 1928 section 7) needs both the association and the replies granted.
    case "${3:-}" in
    udp) commands="connect udpassociate udpreply" ;;
    udp-noreply) commands="connect udpassociate" ;;
    esac
    # Tests start several danted side by side: serialize the account update.
    (
      flock 9
      id "$user" >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin "$user"
      printf '%s:%s\n' "$user" "$pass" | chpasswd
    ) 9>/tmp/exitvoice-test-dante-account.lock
    cat >"$dir/danted.conf" <<CONF
logoutput: $dir/danted.log
internal: 127.0.0.1 port = $port
external: 127.0.0.1
clientmethod: none
socksmethod: username
user.privileged: root
user.unprivileged: nobody
client pass {
  from: 127.0.0.0/8 to: 0.0.0.0/0
  log: error
}
socks pass {
  from: 127.0.0.0/8 to: 127.0.0.0/8
  command: $commands
  log: connect disconnect error
}
socks block {
  from: 0.0.0.0/0 to: 0.0.0.0/0
  log: connect error
}
CONF
    start_bg dante "$dir" danted -f "$dir/danted.conf" -p "$dir/danted-internal.pid"
    wait_listen dante "$port" "$dir"
    ;;
  mitmproxy)
    mitmdump="${MITMDUMP:-$REPO/.tools/venv-mitm/bin/mitmdump}"
    if [ ! -x "$mitmdump" ] && command -v mitmdump >/dev/null; then mitmdump="$(command -v mitmdump)"; fi
    if [ ! -x "$mitmdump" ]; then
      echo "mitmdump not found: python3 -m venv .tools/venv-mitm && .tools/venv-mitm/bin/pip install mitmproxy" >&2
      exit 1
    fi
    start_bg mitmproxy "$dir" "$mitmdump" --mode regular --listen-host 127.0.0.1 \
      --listen-port "$port" --ssl-insecure --set confdir="$dir/conf" --set flow_detail=0 "$@"
    wait_listen mitmproxy "$port" "$dir"
    ;;
  haproxy)
    {
      echo "global"; echo "  maxconn 256"
      echo "defaults"; echo "  mode tcp"; echo "  timeout connect 5s"
      echo "  timeout client 60s"; echo "  timeout server 60s"
      echo "frontend rr"; echo "  bind 127.0.0.1:$port"; echo "  default_backend rr"
      echo "backend rr"; echo "  balance roundrobin"
      n=0
      for backend in "$@"; do n=$((n + 1)); echo "  server b$n 127.0.0.1:$backend"; done
    } >"$dir/haproxy.cfg"
    haproxy -c -q -f "$dir/haproxy.cfg"
    start_bg haproxy "$dir" haproxy -db -f "$dir/haproxy.cfg"
    wait_listen haproxy "$port" "$dir"
    ;;
  haproxy-tls)
    pem="$1"; backend="$2"
    {
      echo "global"; echo "  maxconn 256"
      echo "defaults"; echo "  mode tcp"; echo "  timeout connect 5s"
      echo "  timeout client 60s"; echo "  timeout server 60s"
      echo "frontend tls"; echo "  bind 127.0.0.1:$port ssl crt $pem"; echo "  default_backend b"
      echo "backend b"; echo "  server b1 127.0.0.1:$backend"
    } >"$dir/haproxy.cfg"
    haproxy -c -q -f "$dir/haproxy.cfg"
    start_bg haproxy "$dir" haproxy -db -f "$dir/haproxy.cfg"
    wait_listen haproxy "$port" "$dir"
    ;;
  haproxy-pp)
    # An L4 load balancer in front of the echo: TCP mode, a PROXY protocol v1 (`send-proxy`) or
    # v2 (`send-proxy-v2`) header before the client's bytes.
    mode="$1"; backend="$2"
    case "$mode" in send-proxy|send-proxy-v2) ;; *) echo "haproxy-pp: $mode?" >&2; exit 2 ;; esac
    {
      echo "global"; echo "  maxconn 256"
      echo "defaults"; echo "  mode tcp"; echo "  timeout connect 5s"
      echo "  timeout client 60s"; echo "  timeout server 60s"
      echo "frontend lb"; echo "  bind 127.0.0.1:$port"; echo "  default_backend echo"
      echo "backend echo"; echo "  server e1 127.0.0.1:$backend $mode"
    } >"$dir/haproxy.cfg"
    haproxy -c -q -f "$dir/haproxy.cfg"
    start_bg haproxy "$dir" haproxy -db -f "$dir/haproxy.cfg"
    wait_listen haproxy "$port" "$dir"
    ;;
  haproxy-failover)
    primary="$1"; backup="$2"
    {
      echo "global"; echo "  maxconn 512"
      echo "defaults"; echo "  mode tcp"; echo "  timeout connect 2s"
      echo "  timeout client 60s"; echo "  timeout server 60s"
      echo "frontend db"; echo "  bind 127.0.0.1:$port"; echo "  default_backend db"
      echo "backend db"
      echo "  server primary 127.0.0.1:$primary check inter 200 fall 1 rise 1 on-marked-down shutdown-sessions"
      echo "  server backup 127.0.0.1:$backup check inter 200 fall 1 rise 1 backup"
    } >"$dir/haproxy.cfg"
    haproxy -c -q -f "$dir/haproxy.cfg"
    start_bg haproxy "$dir" haproxy -db -f "$dir/haproxy.cfg"
    wait_listen haproxy "$port" "$dir"
    ;;
  *) echo "unknown proxy kind $kind" >&2; exit 2 ;;
  esac
  ;;
stop)
  dir="$1" name="$2" pidf="$1/$2.pid"
  [ -f "$pidf" ] || exit 0
  pid="$(cat "$pidf")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$pidf"
  ;;
*) echo "usage: proxy.sh start KIND DIR PORT [ARGS…] | stop DIR NAME" >&2; exit 2 ;;
esac
