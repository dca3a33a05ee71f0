#!/usr/bin/env bash
# Stop the Kafka Connect, PostgreSQL and Kafka started by services-up.sh (only
# those: it goes through their pid file / data dir, never by process name).
#   --purge  also delete their data (the Kafka and Connect jar caches are kept).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

case "${1:-}" in
  ""|--purge) ;;
  *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac

rc=0
# Try each even if one fails, so a broken Kafka never leaves Postgres running.
# Connect first: it is a client of both (a no-op when it was not started).
"$SCRIPT_DIR/connect.sh" down "$@" || rc=1
"$SCRIPT_DIR/kafka.sh" down "$@" || rc=1
"$SCRIPT_DIR/postgres.sh" down "$@" || rc=1
exit "$rc"
