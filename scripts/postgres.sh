#!/usr/bin/env bash
# Private PostgreSQL cluster for tests/benchmarks: postgres.sh up|down [--purge]|status
#
# We initdb our own cluster instead of using Debian's `main` cluster so the
# tests never depend on (or disturb) whatever runs on 5432, and so settings
# such as max_connections are under our control.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG=postgres
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$SCRIPT_DIR/lib.sh"

DB_NAME=outbox DB_USER=outbox DB_PASSWORD=outbox
# Replication slots and WAL senders: one of each per Debezium connector (a test run or a
# baked suite registers one per database it creates), with room for parallel runs.
PG_REPLICATION_SLOTS=32

if [ "$(id -u)" -eq 0 ]; then
  # Postgres refuses to run as root, so the server runs as the Debian
  # `postgres` user (created by the postgresql package).
  PG_OS_USER=postgres
else
  PG_OS_USER="$(id -un)"
fi

# Run a command as the cluster owner. `cd /` avoids "could not change
# directory to /root" noise when root's cwd is unreadable for postgres.
as_pg() {
  if [ "$PG_OS_USER" = "$(id -un)" ]; then
    "$@"
  else
    (cd / && runuser -u "$PG_OS_USER" -- "$@")
  fi
}

# Where the cluster lives. Normally $STATE_DIR/pg, but as root $STATE_DIR is
# usually under /root (mode 700), which the postgres user cannot traverse.
# Then the cluster goes to /var/lib/outbox-service-services/pg-<hash of state
# dir> (persistent, unlike /var/tmp which tmpfiles may age out) and
# $STATE_DIR/pg becomes a symlink to it so it is still discoverable.
# OUTBOX_PG_DIR overrides all of this.
resolve_pg_dir() {
  if [ -n "${OUTBOX_PG_DIR:-}" ]; then
    PG_DIR="$OUTBOX_PG_DIR"
  elif [ -e "$STATE_DIR/pg" ]; then
    PG_DIR="$(readlink -f "$STATE_DIR/pg")"
  elif [ "$PG_OS_USER" = "$(id -un)" ] || ! id "$PG_OS_USER" >/dev/null 2>&1 \
      || as_pg test -x "$STATE_DIR"; then
    PG_DIR="$STATE_DIR/pg"
  else
    PG_DIR="/var/lib/outbox-service-services/pg-$(printf %s "$STATE_DIR" | cksum | cut -d' ' -f1)"
  fi
  DATA_DIR="$PG_DIR/data"
  SOCK_DIR="$PG_DIR/run"
  PG_LOG="$PG_DIR/postgres.log"
}

# Highest installed major, unless an existing cluster was created by another
# (still installed) major: data dirs are not compatible across majors.
find_bindir() {
  local v
  if [ -f "$DATA_DIR/PG_VERSION" ]; then
    v="$(cat "$DATA_DIR/PG_VERSION")"
    if [ -x "/usr/lib/postgresql/$v/bin/pg_ctl" ]; then
      PG_BIN="/usr/lib/postgresql/$v/bin"
      return 0
    fi
  fi
  v="$(find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/pg_ctl' 2>/dev/null \
        | awk -F/ '{print $5}' | sort -V | tail -n 1)"
  [ -n "$v" ] || return 1
  PG_BIN="/usr/lib/postgresql/$v/bin"
  if [ -f "$DATA_DIR/PG_VERSION" ] && [ "$(cat "$DATA_DIR/PG_VERSION")" != "$v" ]; then
    die "$DATA_DIR was created by PostgreSQL $(cat "$DATA_DIR/PG_VERSION") but only $v is installed; run scripts/services-down.sh --purge"
  fi
}

is_running() { [ -f "$DATA_DIR/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl" -D "$DATA_DIR" status >/dev/null 2>&1; }
# Port of the running postmaster (4th line of postmaster.pid).
running_port() { sed -n 4p "$DATA_DIR/postmaster.pid" 2>/dev/null; }

init_cluster() {
  [ -f "$DATA_DIR/PG_VERSION" ] && return 0
  log "initdb $DATA_DIR"
  mkdir -p "$PG_DIR"
  if [ "$PG_OS_USER" != "$(id -un)" ]; then
    chown "$PG_OS_USER:" "$PG_DIR"
    [ "$PG_DIR" = "$STATE_DIR/pg" ] || ln -sfn "$PG_DIR" "$STATE_DIR/pg"
  fi
  chmod 700 "$PG_DIR"
  # peer on the private socket (only the owner can reach it: dir is 0700),
  # passwords over TCP so the test URL exercises real auth.
  as_pg "$PG_BIN/initdb" -D "$DATA_DIR" -E UTF8 --locale=C.UTF-8 \
    --auth-local=peer --auth-host=scram-sha-256 >>"$PG_DIR/initdb.log" 2>&1 \
    || { show_tail "$PG_DIR/initdb.log"; die "initdb failed"; }
  as_pg tee -a "$DATA_DIR/postgresql.conf" >/dev/null <<<"include_if_exists = 'outbox.conf'"
}

# Rewritten on every start so OUTBOX_PG_PORT changes take effect.
write_conf() {
  local sock="$SOCK_DIR/.s.PGSQL.$PG_PORT"
  [ "${#sock}" -lt 100 ] || die "unix socket path too long ($sock); set OUTBOX_PG_DIR to a shorter path"
  as_pg mkdir -p "$SOCK_DIR"
  as_pg tee "$DATA_DIR/outbox.conf" >/dev/null <<EOF
# Managed by scripts/postgres.sh; rewritten on each start.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$SOCK_DIR'
max_connections = 200
shared_buffers = 256MB
# Durability stays on: benchmarks must reflect real commit costs.
fsync = on
synchronous_commit = on
# Logical decoding for the Debezium relay (scripts/connect.sh): pgoutput needs
# wal_level=logical, and each connector holds one slot and one WAL sender.
wal_level = logical
max_replication_slots = $PG_REPLICATION_SLOTS
max_wal_senders = $PG_REPLICATION_SLOTS
$(stat_statements_conf)
EOF
}

# pg_stat_statements (shipped with the server package): the benchmark's idle scenario counts
# the statements each system sends. Left out where the library is missing.
stat_statements_lib() { [ -f "${PG_BIN%/bin}/lib/pg_stat_statements.so" ]; }
stat_statements_conf() {
  if stat_statements_lib; then
    printf '%s\n' "# Statement counts per database (bench/idle.py)." \
      "shared_preload_libraries = 'pg_stat_statements'"
  fi
}

# Settings the running server lacks that only a restart applies (empty when none), for
# clusters started before outbox.conf asked for them (e.g. wal_level=logical).
settings_needing_restart() {
  as_pg "$PG_BIN/psql" -X -A -t -q -h "$SOCK_DIR" -p "$PG_PORT" -U "$PG_OS_USER" -d postgres -c "
    SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings
    WHERE (name = 'wal_level' AND setting <> 'logical')
       OR (name IN ('max_replication_slots', 'max_wal_senders')
           AND setting::int < $PG_REPLICATION_SLOTS)
       OR (name = 'shared_preload_libraries' AND $(stat_statements_lib && echo true || echo false)
           AND setting NOT LIKE '%pg_stat_statements%')" \
    || die "could not read the running server's settings"
}

ensure_db() {
  as_pg "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK_DIR" -p "$PG_PORT" \
    -U "$PG_OS_USER" -d postgres >/dev/null <<EOF || die "could not create role/database $DB_NAME"
SELECT 'CREATE ROLE $DB_USER' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$DB_USER')\gexec
-- Superuser so tests can create/drop their own databases; REPLICATION for Debezium
-- (superusers may replicate anyway, but its connector checks the attribute).
ALTER ROLE $DB_USER WITH LOGIN SUPERUSER REPLICATION PASSWORD '$DB_PASSWORD';
SELECT 'CREATE DATABASE $DB_NAME OWNER $DB_USER' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB_NAME')\gexec
EOF
}

cmd_up() {
  take_lock postgres
  resolve_pg_dir
  if ! find_bindir; then
    apt_install postgresql
    find_bindir || die "PostgreSQL installed but no /usr/lib/postgresql/*/bin/pg_ctl found"
  fi
  # The postgres user may only exist now (fresh install): decide again.
  resolve_pg_dir

  local stale
  if is_running && [ "$(running_port)" = "$PG_PORT" ]; then
    stale="$(settings_needing_restart)"
    if [ -n "$stale" ]; then
      # Only when a setting is missing: a cluster already configured is never restarted.
      log "running cluster has $stale; restarting it for logical decoding (wal_level=logical, $PG_REPLICATION_SLOTS slots) and statement counts (pg_stat_statements)"
      write_conf
      as_pg "$PG_BIN/pg_ctl" -D "$DATA_DIR" -l "$PG_LOG" -m fast -w -t 60 restart >/dev/null 2>&1 9>&- \
        || { show_tail "$PG_LOG"; die "pg_ctl restart failed"; }
    else
      log "reusing running cluster $DATA_DIR on 127.0.0.1:$PG_PORT"
    fi
  else
    # Checked before any restart so a bad port never takes ours down.
    port_open "$PG_PORT" && die "127.0.0.1:$PG_PORT is already used by another process; set OUTBOX_PG_PORT"
    if is_running; then
      log "running on port $(running_port), restarting on $PG_PORT"
      as_pg "$PG_BIN/pg_ctl" -D "$DATA_DIR" -m fast -w stop >/dev/null
    fi
    init_cluster
    write_conf
    log "starting PostgreSQL $(basename "$(dirname "$PG_BIN")") on 127.0.0.1:$PG_PORT (log: $PG_LOG)"
    # 9>&-: the postmaster must not inherit (and hold forever) our lock fd.
    as_pg "$PG_BIN/pg_ctl" -D "$DATA_DIR" -l "$PG_LOG" -w -t 60 start >/dev/null 2>&1 9>&- \
      || { show_tail "$PG_LOG"; die "pg_ctl start failed"; }
  fi
  local i
  for i in $(seq 1 30); do
    "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break
    [ "$i" -lt 30 ] || { show_tail "$PG_LOG"; die "pg_isready never succeeded"; }
    sleep 1
  done
  ensure_db
  echo "export TEST_DATABASE_URL=postgresql+asyncpg://$DB_USER:$DB_PASSWORD@127.0.0.1:$PG_PORT/$DB_NAME"
}

cmd_down() {
  take_lock postgres
  resolve_pg_dir
  if find_bindir && is_running; then
    local port
    port="$(running_port)"
    as_pg "$PG_BIN/pg_ctl" -D "$DATA_DIR" -m fast -w stop >/dev/null
    log "stopped PostgreSQL (was listening on 127.0.0.1:$port, data $DATA_DIR)"
  else
    log "not running (data $DATA_DIR)"
  fi
  if [ "${1:-}" = "--purge" ]; then
    rm -rf "$PG_DIR"
    [ -L "$STATE_DIR/pg" ] && rm -f "$STATE_DIR/pg"
    log "purged $PG_DIR"
  fi
}

cmd_status() {
  resolve_pg_dir
  if find_bindir && is_running; then
    log "running on 127.0.0.1:$(running_port) (data $DATA_DIR, log $PG_LOG)"
  else
    log "not running (data $DATA_DIR)"
    return 3
  fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) shift; cmd_down "$@" ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down [--purge]|status" >&2; exit 2 ;;
esac
