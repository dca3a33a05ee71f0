# shellcheck shell=bash disable=SC2034  # variables here are used by the sourcing scripts
# Shared helpers for postgres.sh, kafka.sh and connect.sh. Sourced, never executed.
#
# Contract for every script: progress goes to stderr, only `export ...` lines
# go to stdout, so `eval "$(scripts/services-up.sh)"` is safe.

log() { printf '[%s] %s\n' "${LOG_TAG:-services}" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

STATE_DIR="${OUTBOX_SERVICES_DIR:-$HOME/.cache/outbox-service-services}"
PG_PORT="${OUTBOX_PG_PORT:-55432}"
KAFKA_PORT="${OUTBOX_KAFKA_PORT:-39092}"
case "$PG_PORT$KAFKA_PORT" in
  *[!0-9]*) die "OUTBOX_PG_PORT / OUTBOX_KAFKA_PORT must be numbers" ;;
esac
KAFKA_CONTROLLER_PORT="$((KAFKA_PORT + 1))"

# True when something accepts TCP connections on 127.0.0.1:$1. Uses bash's
# /dev/tcp so no netcat is needed; `timeout` guards against a hung SYN.
port_open() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# Run a command as root: directly, via sudo, or fail with a useful message.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root to run '$*' (not root and no sudo); install it manually"
  fi
}

_APT_UPDATED=""
# Install Debian packages by name; `apt-get update` at most once per run.
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install manually: $*"
  if [ -z "$_APT_UPDATED" ]; then
    log "apt-get update"
    as_root apt-get update -qq >&2 || die "apt-get update failed"
    _APT_UPDATED=1
  fi
  log "apt-get install $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2 \
    || die "apt-get install $* failed"
}

# Ensure command $1 exists, installing Debian package $2 if not.
need_cmd() {
  command -v "$1" >/dev/null 2>&1 && return 0
  apt_install "$2"
  command -v "$1" >/dev/null 2>&1 || die "'$1' still missing after installing $2"
}

# Serialise concurrent invocations (parallel CI jobs sharing one machine)
# so two callers never initdb/format/start the same service at once.
# Daemons must be started with `9>&-`, or they would hold the lock forever.
take_lock() {
  mkdir -p "$STATE_DIR"
  exec 9>"$STATE_DIR/.$1.lock"
  flock -w 300 9 || die "timed out waiting for lock $STATE_DIR/.$1.lock"
}

# Print the last lines of a log file to stderr (for failure diagnostics).
show_tail() {
  [ -f "$1" ] || return 0
  log "---- last lines of $1 ----"
  tail -n "${2:-40}" "$1" >&2 || true
  log "---- end of $1 ----"
}

# The pid in $PID_FILE when it is a live process whose command line matches the
# regex $1 (guards against pid reuse after a reboot). A stale pid file (and
# $PORT_FILE) is removed.
live_pid_matching() {
  local pattern="$1" pid
  [ -f "$PID_FILE" ] || return 1
  pid="$(cat "$PID_FILE")"
  if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "$pattern"; then
    echo "$pid"
    return 0
  fi
  log "removing stale pid file $PID_FILE"
  rm -f "$PID_FILE" "$PORT_FILE"
  return 1
}

# SIGTERM, up to 60 s for a clean shutdown, then SIGKILL; removes $PID_FILE and
# $PORT_FILE.
stop_pid() {
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    [ "$i" -lt 60 ] || { log "still alive after 60s, sending SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
    sleep 1
  done
  rm -f "$PID_FILE" "$PORT_FILE"
}

DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.6.1

# Resolve the dependencies of the pom $1/pom.xml (written by the caller) into the
# folder $2 with mvn, checksums enforced (-C). Copied into a temp dir and renamed,
# so an interrupted run never leaves a half-filled folder that looks complete
# ($2/.complete marks a finished one). $3 names what is resolved, for messages.
mvn_copy_jars() {
  local home="$1" libs="$2" what="$3"
  log "resolving $what with mvn (log: $home/mvn.log)"
  rm -rf "$libs.tmp"
  mvn -B -q -C -f "$home/pom.xml" "$DEPENDENCY_PLUGIN:copy-dependencies" \
      -DincludeScope=runtime -DoutputDirectory="$libs.tmp" >"$home/mvn.log" 2>&1 \
    || { show_tail "$home/mvn.log"; die "mvn could not resolve $what"; }
  rm -rf "$libs"
  mv "$libs.tmp" "$libs"
  touch "$libs/.complete"
}

# A log4j2 configuration at $1 that writes INFO and up to the log file $2, rolled
# at 50 MB, two files kept. Callers append their own logger lines.
write_log4j2_file() {
  cat >"$1" <<EOF
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = $2
appender.file.filePattern = $2.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
EOF
}

# Up to 5 s for the just-started process to write $PID_FILE ($1 names it in the error).
wait_pid_file() {
  local i
  for i in $(seq 1 50); do
    [ -s "$PID_FILE" ] && return 0
    sleep 0.1
  done
  die "$1 did not write $PID_FILE"
}
