#!/usr/bin/env bash
# Start (or reuse) the local PostgreSQL and Kafka used by tests/benchmarks,
# without Docker. Usage:  eval "$(scripts/services-up.sh [--with-connect])"
#
# --with-connect (or OUTBOX_WITH_CONNECT=1): also Kafka Connect with the Debezium
#      PostgreSQL connector (scripts/connect.sh), exported as TEST_CONNECT_URL.
# Env: OUTBOX_PG_PORT (55432), OUTBOX_KAFKA_PORT (39092, controller = +1),
#      OUTBOX_CONNECT_PORT (38083), OUTBOX_SERVICES_DIR (~/.cache/outbox-service-services),
#      OUTBOX_KAFKA_VERSION.
# Progress goes to stderr; stdout carries only the export lines, and only
# once every service is up, so a failed run never half-configures a shell.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

with_connect="${OUTBOX_WITH_CONNECT:-0}"
case "${1:-}" in
  "") ;;
  --with-connect) with_connect=1 ;;
  *) echo "usage: $0 [--with-connect]" >&2; exit 2 ;;
esac

pg_env="$("$SCRIPT_DIR/postgres.sh" up)" || { echo "services-up: PostgreSQL failed to start" >&2; exit 1; }
kafka_env="$("$SCRIPT_DIR/kafka.sh" up)" || { echo "services-up: Kafka failed to start" >&2; exit 1; }
if [ "$with_connect" = 1 ]; then
  # After Kafka: the worker keeps its state in topics on that broker.
  connect_env="$("$SCRIPT_DIR/connect.sh" up)" || { echo "services-up: Kafka Connect failed to start" >&2; exit 1; }
  printf '%s\n%s\n%s\n' "$pg_env" "$kafka_env" "$connect_env"
else
  printf '%s\n%s\n' "$pg_env" "$kafka_env"
fi
