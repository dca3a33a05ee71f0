#!/usr/bin/env bash
# Kafka Connect (distributed mode, one worker) with the Debezium PostgreSQL connector, for
# tests and VMs:   connect.sh up|down [--purge]|status|kill
#
# `kill` SIGKILLs the worker (fault tests: a crashed Connect); `up` brings it back with
# its connectors and their offsets, which live in Kafka.
#
# No Docker and no tarball: Apache Kafka's Connect runtime and Debezium's connector come
# from Maven Central via plain `mvn` (checksums enforced), all jars on one classpath,
# cached in $STATE_DIR/connect-<kafka>-debezium-<version>/libs. The worker keeps its
# state (connector configs, source offsets, statuses) in internal topics on the test
# Kafka started by kafka.sh, so it must be up first. REST API: http://127.0.0.1:38083.
#
# Env: OUTBOX_CONNECT_PORT (REST port, 38083), OUTBOX_KAFKA_PORT (the broker, 39092),
#      OUTBOX_CONNECT_KAFKA_VERSION (Connect runtime, default = kafka.sh's broker),
#      OUTBOX_DEBEZIUM_VERSION, OUTBOX_CONNECT_HEAP (1g), OUTBOX_CONNECT_START_TIMEOUT (120 s).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG=connect
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$SCRIPT_DIR/lib.sh"

CONNECT_PORT="${OUTBOX_CONNECT_PORT:-38083}"
case "$CONNECT_PORT" in
  ""|*[!0-9]*) die "OUTBOX_CONNECT_PORT must be a number" ;;
esac
# The same version as the broker kafka.sh runs (any broker >= 2.1 would do). Debezium
# 3.3 is built against Connect 4.1; its connector and the outbox router run unchanged
# on 4.3 (the connector and SMT APIs are stable), checked by tests/test_connect_native.py.
KAFKA_VERSION="${OUTBOX_CONNECT_KAFKA_VERSION:-${OUTBOX_KAFKA_VERSION:-4.3.1}}"
DEBEZIUM_VERSION="${OUTBOX_DEBEZIUM_VERSION:-3.3.2.Final}"
# Debezium pins jackson-core 2.19 while Connect needs 2.21 (its databind): one BOM for
# the whole classpath, Connect's version, so no mixed Jackson jars end up side by side.
JACKSON_VERSION=2.21.2
LOG4J_VERSION=2.25.4   # slf4j 1.x binding, as kafka.sh (Connect logs through slf4j-api 1.7)
# The compose image ({{cookiecutter.project_slug}}/deploy/connect/: Dockerfile ARGs, pom.xml,
# worker.properties) pins the same versions, pom and settings: tests/test_connect_image.py fails when they differ.

CONNECT_HOME="$STATE_DIR/connect-$KAFKA_VERSION-debezium-$DEBEZIUM_VERSION"  # cache only
LIBS="$CONNECT_HOME/libs"
CDIR="$STATE_DIR/connect"                     # config, logs, pid
PID_FILE="$CDIR/connect.pid"
PORT_FILE="$CDIR/connect.ports"               # "<rest port> <kafka port>" of the running worker
CONNECT_LOG="$CDIR/logs/connect.log"
URL="http://127.0.0.1:$CONNECT_PORT"
# One Connect cluster per REST port: two workers on two ports never join each other's
# group, and a restart on the same port finds its connectors and offsets again.
GROUP_ID="outbox-connect-$CONNECT_PORT"

resolve_jars() {
  [ -f "$LIBS/.complete" ] && return 0
  need_cmd mvn maven
  mkdir -p "$CONNECT_HOME"
  cat >"$CONNECT_HOME/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.outbox-service</groupId>
  <artifactId>connect-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency><groupId>com.fasterxml.jackson</groupId><artifactId>jackson-bom</artifactId><version>$JACKSON_VERSION</version><type>pom</type><scope>import</scope></dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <!-- connect-runtime brings connect-api, connect-json, connect-transforms, kafka-clients. -->
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId><version>$KAFKA_VERSION</version></dependency>
    <!-- Brings debezium-core (io.debezium.transforms.outbox.EventRouter), debezium-api,
         the PostgreSQL JDBC driver and protobuf; it declares connect-api as provided. -->
    <dependency><groupId>io.debezium</groupId><artifactId>debezium-connector-postgres</artifactId><version>$DEBEZIUM_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
  mvn_copy_jars "$CONNECT_HOME" "$LIBS" \
    "connect-runtime:$KAFKA_VERSION + debezium-connector-postgres:$DEBEZIUM_VERSION"
}

# Rewritten on each start so port overrides take effect.
write_config() {
  mkdir -p "$CDIR/logs"
  cat >"$CDIR/worker.properties" <<EOF
# Managed by scripts/connect.sh; rewritten on each start.
bootstrap.servers=127.0.0.1:$KAFKA_PORT
group.id=$GROUP_ID
config.storage.topic=$GROUP_ID-configs
offset.storage.topic=$GROUP_ID-offsets
status.storage.topic=$GROUP_ID-status
# Single broker: internal topics with one replica, few partitions (fast to create).
config.storage.replication.factor=1
offset.storage.replication.factor=1
offset.storage.partitions=5
status.storage.replication.factor=1
status.storage.partitions=1
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
listeners=http://127.0.0.1:$CONNECT_PORT
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$CONNECT_PORT
# Every plugin is on the classpath (no plugin.path). Kafka's and Debezium's jars declare
# their plugins in ServiceLoader manifests, so no reflective scan of all ~70 jars is
# needed (only_scan: 9 s of a 20 s start here; service_load: 0.5 s). check_plugins
# below fails the start if the connector or the outbox router were not found.
plugin.discovery=service_load
# Source offsets every second (default 60 s): after a crash, Debezium re-sends at most
# about a second of changes instead of a minute.
offset.flush.interval.ms=1000
# A worker that comes back after a crash gets its tasks at once, not after 5 minutes,
# and its group forgets the dead member after 6 s (the broker's minimum), not 10.
scheduled.rebalance.max.delay.ms=0
session.timeout.ms=6000
heartbeat.interval.ms=2000
# Connectors may tune their producer (linger.ms, batch.size, ...).
connector.client.config.override.policy=All
EOF
  write_log4j2_file "$CDIR/log4j2.properties" "$CONNECT_LOG"
  cat >>"$CDIR/log4j2.properties" <<EOF
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
EOF
}

# Our worker's pid, if the pid file points at a live process of it (lib.sh).
live_pid() { live_pid_matching 'connect\.cli\.ConnectDistributed'; }

# HTTP GET of $URL$1 (body on stdout); fails on connection errors and non-2xx.
rest_get() { curl -fsS --max-time 10 "$URL$1"; }

start_worker() {
  rm -f "$PID_FILE"
  [ -f "$CONNECT_LOG" ] && mv -f "$CONNECT_LOG" "$CONNECT_LOG.prev"
  log "starting Kafka Connect $KAFKA_VERSION + Debezium $DEBEZIUM_VERSION on $URL (kafka 127.0.0.1:$KAFKA_PORT, group $GROUP_ID, log: $CONNECT_LOG)"
  # setsid, pid written by the exec'ing shell, 9>&-: as kafka.sh (see there).
  # shellcheck disable=SC2016  # $$ and $1 are for the inner shell
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$PID_FILE" \
    java -Xms256m -Xmx"${OUTBOX_CONNECT_HEAP:-1g}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -Djava.awt.headless=true -Dlog4j2.configurationFile="$CDIR/log4j2.properties" \
      -cp "$LIBS/*" org.apache.kafka.connect.cli.ConnectDistributed "$CDIR/worker.properties" \
      </dev/null >"$CDIR/logs/connect.out" 2>&1 9>&- &
  echo "$CONNECT_PORT $KAFKA_PORT" >"$PORT_FILE"
  wait_pid_file worker
}

# Ready = JVM alive and GET /health says the worker finished starting (it has joined
# its group and read its internal topics); before that the REST API answers 503.
wait_ready() {
  local timeout="${OUTBOX_CONNECT_START_TIMEOUT:-120}" pid
  local deadline=$((SECONDS + timeout))
  while :; do
    sleep 1
    pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      show_tail "$CDIR/logs/connect.out" 20; show_tail "$CONNECT_LOG"
      die "Kafka Connect exited during startup"
    fi
    rest_get /health >/dev/null 2>&1 && return 0
    if [ "$SECONDS" -ge "$deadline" ]; then
      show_tail "$CONNECT_LOG"
      die "Kafka Connect not ready after ${timeout}s (pid $pid still running; stop it with scripts/connect.sh down)"
    fi
  done
}

# A wrong jar set shows up here, at startup, rather than as a failed registration later.
check_plugins() {
  local plugins cls
  plugins="$(rest_get '/connector-plugins?connectorsOnly=false')" || die "GET $URL/connector-plugins failed"
  for cls in io.debezium.connector.postgresql.PostgresConnector io.debezium.transforms.outbox.EventRouter; do
    grep -q "\"$cls\"" <<<"$plugins" || { show_tail "$CONNECT_LOG"; die "Kafka Connect does not list $cls"; }
  done
}

print_env() { echo "export TEST_CONNECT_URL=$URL"; }

cmd_up() {
  local pid
  take_lock connect
  if pid="$(live_pid)" && [ "$(cat "$PORT_FILE" 2>/dev/null)" = "$CONNECT_PORT $KAFKA_PORT" ]; then
    if rest_get /health >/dev/null 2>&1; then
      log "reusing running worker (pid $pid) on $URL"
    else
      log "worker pid $pid not ready yet, waiting"
      wait_ready
    fi
    print_env
    return 0
  fi
  # Checked before any restart so a bad port never takes ours down (our own worker may
  # hold the REST port when only the Kafka port changed).
  pid="$(live_pid)" || pid=""
  if [ -z "$pid" ] || [ "$(cut -d' ' -f1 "$PORT_FILE" 2>/dev/null)" != "$CONNECT_PORT" ]; then
    port_open "$CONNECT_PORT" && die "127.0.0.1:$CONNECT_PORT is already used by another process; set OUTBOX_CONNECT_PORT"
  fi
  port_open "$KAFKA_PORT" || die "no Kafka on 127.0.0.1:$KAFKA_PORT: start it first (scripts/kafka.sh up)"
  if [ -n "$pid" ]; then
    log "running with ports $(cat "$PORT_FILE" 2>/dev/null) (rest, kafka), restarting with $CONNECT_PORT $KAFKA_PORT"
    stop_pid "$pid"
  fi
  need_cmd java default-jre-headless
  need_cmd curl curl
  resolve_jars
  write_config
  start_worker
  wait_ready
  check_plugins
  log "ready"
  print_env
}

cmd_down() {
  local pid ports connectors name
  take_lock connect
  if pid="$(live_pid)"; then
    ports="$(cat "$PORT_FILE" 2>/dev/null || echo "?")"
    if [ "${1:-}" = "--purge" ]; then
      # Connector configs live in Kafka, not in $CDIR: delete them so a purged worker
      # starts empty. (Their replication slots stay in PostgreSQL: drop those yourself.)
      URL="http://127.0.0.1:${ports%% *}"
      connectors="$(rest_get /connectors 2>/dev/null | tr -d '[]"' | tr ',' ' ')" || connectors=""
      for name in $connectors; do
        curl -fsS --max-time 30 -X DELETE "$URL/connectors/$name" >/dev/null && log "deleted connector $name"
      done
    fi
    stop_pid "$pid"
    log "stopped Kafka Connect pid $pid (was on ports $ports: rest, kafka)"
  else
    log "not running"
  fi
  if [ "${1:-}" = "--purge" ]; then
    # Jars in connect-<version>/ are a download cache, not state: keep them.
    rm -rf "$CDIR"
    log "purged $CDIR"
  fi
}

cmd_kill() {
  local pid i
  take_lock connect
  pid="$(live_pid)" || { log "not running"; return 0; }
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$PID_FILE" "$PORT_FILE"
  log "SIGKILLed Kafka Connect pid $pid"
}

cmd_status() {
  local pid
  if pid="$(live_pid)" && curl -fsS --max-time 10 "http://127.0.0.1:$(cut -d' ' -f1 "$PORT_FILE")/health" >/dev/null 2>&1; then
    log "running, pid $pid, REST on 127.0.0.1:$(cut -d' ' -f1 "$PORT_FILE"), kafka 127.0.0.1:$(cut -d' ' -f2 "$PORT_FILE") (log $CONNECT_LOG)"
  else
    log "not running"
    return 3
  fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) shift; cmd_down "$@" ;;
  status) cmd_status ;;
  kill) cmd_kill ;;
  *) echo "usage: $0 up|down [--purge]|status|kill" >&2; exit 2 ;;
esac
