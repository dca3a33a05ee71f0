#!/usr/bin/env bash
# Start (or reuse) the local PostgreSQL and Kafka used by tests/benchmarks,
# without Docker. Usage:  eval "$(scripts/services-up.sh)"
#
# Env: OUTBOX_PG_PORT (55432), OUTBOX_KAFKA_PORT (39092, controller = +1),
#      OUTBOX_SERVICES_DIR (~/.cache/outbox-service-services), OUTBOX_KAFKA_VERSION.
# Progress goes to stderr; stdout carries only the export lines, and only
# once both services are up, so a failed run never half-configures a shell.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

pg_env="$("$SCRIPT_DIR/postgres.sh" up)" || { echo "services-up: PostgreSQL failed to start" >&2; exit 1; }
kafka_env="$("$SCRIPT_DIR/kafka.sh" up)" || { echo "services-up: Kafka failed to start" >&2; exit 1; }

printf '%s\n%s\n' "$pg_env" "$kafka_env"
