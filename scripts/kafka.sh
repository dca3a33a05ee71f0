#!/usr/bin/env bash
# Single-node Apache Kafka (KRaft, broker+controller in one JVM) for tests:
#   kafka.sh up|down [--purge]|status
#
# No Docker and no tarball download: the broker jars come from Maven Central
# via plain `mvn`, cached in $STATE_DIR/kafka-<version>/libs.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG=kafka
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$SCRIPT_DIR/lib.sh"

# Pinned rather than "latest" so every machine runs the same broker. 4.4.0 is
# listed in Central's metadata but its kafka-tools-api jar was not resolvable
# when this was written; bump deliberately after checking it resolves.
KAFKA_VERSION="${OUTBOX_KAFKA_VERSION:-4.3.1}"
# Kafka 4.x depends on slf4j-api 1.7.x but ships no binding; log4j-slf4j-impl
# (the slf4j 1.x binding) + log4j-core give a real log file.
LOG4J_VERSION=2.25.4
# Fixed cluster id: base64url("outbox-service-1"); nothing depends on it
# being unique since the cluster is single-node and private.
CLUSTER_ID=b3V0Ym94LXNlcnZpY2UtMQ

KAFKA_HOME="$STATE_DIR/kafka-$KAFKA_VERSION"   # version-specific, cache only
LIBS="$KAFKA_HOME/libs"
KDIR="$STATE_DIR/kafka"                        # data, config, logs, pid
PID_FILE="$KDIR/kafka.pid"
PORT_FILE="$KDIR/kafka.port"
SERVER_LOG="$KDIR/logs/server.log"

java_cmd() {
  java -cp "$LIBS/*" -Dlog4j2.configurationFile="$KDIR/$1" "${@:2}"
}

resolve_jars() {
  [ -f "$LIBS/.complete" ] && return 0
  need_cmd mvn maven
  mkdir -p "$KAFKA_HOME"
  cat >"$KAFKA_HOME/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.outbox-service</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
  mvn_copy_jars "$KAFKA_HOME" "$LIBS" "kafka_2.13:$KAFKA_VERSION and dependencies"
}

# Rewritten on each start so port overrides take effect. Static
# controller.quorum.voters (rather than a --standalone dynamic quorum) keeps
# the controller address out of the formatted metadata, so changing
# OUTBOX_KAFKA_PORT later does not require re-formatting.
write_config() {
  mkdir -p "$KDIR/data" "$KDIR/logs"
  cat >"$KDIR/server.properties" <<EOF
# Managed by scripts/kafka.sh; rewritten on each start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KDIR/data
num.partitions=3
auto.create.topics.enable=true
group.initial.rebalance.delay.ms=0
# Single node: internal topics must not ask for more replicas than exist.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
  write_log4j2_file "$KDIR/log4j2-server.properties" "$SERVER_LOG"
  # CLI tools (format, readiness probe): only real errors, on stderr.
  cat >"$KDIR/log4j2-tools.properties" <<EOF
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = ERROR
rootLogger.appenderRef.err.ref = err
EOF
}

format_storage() {
  [ -f "$KDIR/data/meta.properties" ] && return 0
  log "formatting storage in $KDIR/data (cluster id $CLUSTER_ID)"
  java_cmd log4j2-tools.properties kafka.tools.StorageTool format --ignore-formatted \
      -t "$CLUSTER_ID" -c "$KDIR/server.properties" >"$KDIR/logs/format.log" 2>&1 \
    || { show_tail "$KDIR/logs/format.log"; die "kafka storage format failed"; }
}

# Our broker's pid, if the pid file points at a live process of it (lib.sh).
live_pid() { live_pid_matching 'kafka\.Kafka'; }

start_broker() {
  rm -f "$PID_FILE"
  [ -f "$SERVER_LOG" ] && mv -f "$SERVER_LOG" "$SERVER_LOG.prev"
  log "starting Kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT, log: $SERVER_LOG)"
  # setsid: detach from the caller's session so Ctrl-C / CI step teardown of
  # the caller's process group does not kill the broker. The pid is written
  # by the shell that then execs java, so it is exactly the JVM's pid.
  # 9>&-: do not let the JVM inherit our lock fd.
  # shellcheck disable=SC2016  # $$ and $1 are for the inner shell
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$PID_FILE" \
    java -Xms512m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$KDIR/log4j2-server.properties" \
      -cp "$LIBS/*" kafka.Kafka "$KDIR/server.properties" \
      </dev/null >"$KDIR/logs/kafka.out" 2>&1 9>&- &
  echo "$KAFKA_PORT" >"$PORT_FILE"
  wait_pid_file broker
}

# Whether this start logged that startup finished: in server.log or in a file it rolled
# over to since the start (a broker loading thousands of partitions logs tens of MB while
# starting). Older runs' files (server.log.prev, older rollovers) predate the pid file.
logged_started() {
  find "$KDIR/logs" -maxdepth 1 -name 'server.log*' ! -name '*.prev' -newer "$PID_FILE" \
    -exec grep -l 'Kafka Server started' {} + 2>/dev/null | grep -q .
}

# The startup window: 90 s, plus 1 s per 100 partitions on disk (each one is loaded and
# logged at start; a long-lived dev broker collects thousands of test topics).
start_timeout() {
  local partitions
  partitions="$(find "$KDIR/data" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l)"
  echo "${OUTBOX_KAFKA_START_TIMEOUT:-$((90 + partitions / 100))}"
}

# Ready = JVM alive, it logged that startup finished (in KRaft that happens
# after the broker is unfenced), and an AdminClient request round-trips.
wait_ready() {
  local timeout deadline pid
  timeout="$(start_timeout)"
  deadline=$((SECONDS + timeout))
  while :; do
    sleep 1
    pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      show_tail "$KDIR/logs/kafka.out" 20; show_tail "$SERVER_LOG"
      die "Kafka exited during startup"
    fi
    if logged_started && port_open "$KAFKA_PORT" \
        && java_cmd log4j2-tools.properties kafka.admin.ConfigCommand \
             --bootstrap-server "127.0.0.1:$KAFKA_PORT" --describe --entity-type brokers \
             --entity-name 1 >/dev/null 2>>"$KDIR/logs/probe.log"; then
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      show_tail "$SERVER_LOG"; show_tail "$KDIR/logs/probe.log" 10
      die "Kafka not ready after ${timeout}s (pid $pid still running; stop it with scripts/kafka.sh down; OUTBOX_KAFKA_START_TIMEOUT sets the window)"
    fi
  done
}

cmd_up() {
  local pid p
  take_lock kafka
  if pid="$(live_pid)" && [ "$(cat "$PORT_FILE" 2>/dev/null)" = "$KAFKA_PORT" ]; then
    if port_open "$KAFKA_PORT"; then
      log "reusing running broker (pid $pid) on 127.0.0.1:$KAFKA_PORT"
    else
      # Alive but not listening: probably still starting (e.g. an earlier
      # run timed out); give it the normal startup window.
      log "broker pid $pid not accepting connections yet, waiting"
      wait_ready
    fi
    echo "export TEST_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_PORT"
    return 0
  fi
  # Checked before any restart so a bad port never takes ours down.
  for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    port_open "$p" && die "127.0.0.1:$p is already used by another process; set OUTBOX_KAFKA_PORT"
  done
  if pid="$(live_pid)"; then
    log "running on port $(cat "$PORT_FILE" 2>/dev/null), restarting on $KAFKA_PORT"
    stop_pid "$pid"
  fi
  need_cmd java default-jre-headless
  resolve_jars
  write_config
  format_storage
  : >"$KDIR/logs/probe.log"
  start_broker
  wait_ready
  log "ready"
  echo "export TEST_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_PORT"
}

cmd_down() {
  local pid port
  take_lock kafka
  if pid="$(live_pid)"; then
    port="$(cat "$PORT_FILE" 2>/dev/null || echo "?")"
    stop_pid "$pid"
    log "stopped Kafka pid $pid (was listening on 127.0.0.1:$port, data $KDIR/data)"
  else
    log "not running (data $KDIR/data)"
  fi
  if [ "${1:-}" = "--purge" ]; then
    # Jars in kafka-<version>/ are a download cache, not data: keep them.
    rm -rf "$KDIR"
    log "purged $KDIR"
  fi
}

cmd_status() {
  local pid
  if pid="$(live_pid)" && port_open "$(cat "$PORT_FILE" 2>/dev/null || echo 0)"; then
    log "running, pid $pid, on 127.0.0.1:$(cat "$PORT_FILE") (data $KDIR/data, log $SERVER_LOG)"
  else
    log "not running (data $KDIR/data)"
    return 3
  fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) shift; cmd_down "$@" ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down [--purge]|status" >&2; exit 2 ;;
esac
