# Sourced by the benchmark scripts: a throwaway PostgreSQL cluster on a free loopback port.
# Debian's server binaries (`apt-get install postgresql`), run as `postgres` when root (initdb
# refuses root), trust authentication on loopback, default settings, in a temporary directory.
#   pg_start      starts it; sets PGBIN, PGDIR, PGPORT and PGRUN (the command prefix)
#   pg_createdb N creates database N; prints its URL
#   pg_cpu_seconds the cluster's CPU seconds so far (closed backends included)
#   pg_recycle_wal N  leaves N WAL segments ready for reuse, as a server that has run has them
#   pg_stop       stops it and removes its directory (safe to call when none was started)
PGDIR= PGRUN=()

pg_start() {
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$PGBIN/initdb" ] || { echo "needs PostgreSQL's server (apt-get install postgresql)" >&2; return 1; }
  PGDIR=$(mktemp -d /tmp/exitvoice-bench-pg.XXXXXX)
  if [ "$(id -u)" = 0 ]; then chown postgres: "$PGDIR"; PGRUN=(runuser -u postgres --); fi
  "${PGRUN[@]}" "$PGBIN/initdb" -D "$PGDIR/data" -U exitvoice --auth=trust >/dev/null
  PGPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w \
    -o "-p $PGPORT -k $PGDIR -c listen_addresses=127.0.0.1" start >/dev/null
}

pg_createdb() {
  "$PGBIN/createdb" -h "$PGDIR" -p "$PGPORT" -U exitvoice "$1"
  echo "postgres://exitvoice@127.0.0.1:$PGPORT/$1"
}

# The cluster's CPU seconds so far: the postmaster's own and its ended children's (every
# backend that has closed), so a client's whole use once it has disconnected.
pg_cpu_seconds() {
  local pid
  pid=$(head -1 "$PGDIR/data/postmaster.pid")
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15 + $16 + $17) / hz }' "/proc/$pid/stat"
}

# A fresh cluster makes each new 16 MB WAL segment by writing zeros and syncing them
# (`wal_init_zero`), and every commit waits meanwhile: under a few MB/s of WAL, a stall every
# few seconds. A server that has been through a checkpoint renames the segments the checkpoint
# freed instead (`wal_recycle`; it keeps as many as the WAL between its checkpoints, up to
# `max_wal_size`). N segments switched through and a CHECKPOINT leave N of them to rename.
pg_recycle_wal() {
  local i sql=(-c "CREATE TABLE recycle_wal (n int)")
  for i in $(seq "$1"); do
    sql+=(-c "INSERT INTO recycle_wal VALUES ($i)" -c "SELECT pg_switch_wal()")
  done
  psql -q -h 127.0.0.1 -p "$PGPORT" -U exitvoice postgres "${sql[@]}" \
    -c "DROP TABLE recycle_wal" -c CHECKPOINT >/dev/null
}

pg_stop() {
  [ -n "$PGDIR" ] || return 0
  "${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$PGDIR"
  PGDIR=
}
