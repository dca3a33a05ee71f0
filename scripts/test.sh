#!/usr/bin/env bash
# THE test command of the template repository:
#
#   ./scripts/test.sh [pytest args...]      e.g.  ./scripts/test.sh -k default -x
#
# 1. ensures uv and the tooling venv .venv (from pyproject.toml);
# 2. starts (or reuses) PostgreSQL (wal_level=logical), Kafka and Kafka Connect with the
#    Debezium PostgreSQL connector, without Docker (scripts/services-up.sh --with-connect);
# 3. runs pytest on tests/: hooks unit tests, bakes of every supported option combination
#    (leftover Jinja, removed files, ruff, mypy), the baked projects' own suites on the
#    real services, and upgrades with cruft from an earlier commit of this repository
#    (tests/test_upgrade.py: needs the git history; skipped in a shallow clone).
#
# The services keep running afterwards so the next run starts fast; stop them with
# scripts/services-down.sh. Exit code: pytest's.
#
# Env: PYTHON (interpreter for the tooling venv, default python3),
#      TEMPLATE_ALLOW_MISSING_PYTHON=1 (skip combinations whose Python is not installed),
#      TEMPLATE_PYTHON_3_12=/abs/python3.12 etc. (use this interpreter for that version),
#      TEMPLATE_ALL_SUITES=1 (run the whole baked suite of every combination; by default
#      the default runs all of it, the other combinations only the paths of their
#      `modules` in tests/combos.py (SMOKE: what their options can change); much slower),
#      TEMPLATE_SUITE_ARGS='-m "not slow"' (extra pytest args for the baked suites; for quick
#      local runs: skips their fault-injection tests).
#      GUARANTEES_FAST=0 (the baked suites' guarantees scenarios with the full 30 s Kafka
#      outage; default 1: 10 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

START=$SECONDS
log() { printf '[test.sh %4ds] %s\n' "$((SECONDS - START))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- a real interpreter (absolute path; pyenv shims resolve per directory) -------------
PY="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')" \
  || die "no working ${PYTHON:-python3}; install Python 3.11+ or set PYTHON=/path/to/python3"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$PY is older than 3.11; set PYTHON=/path/to/python3.11+"

VENV="$ROOT/.venv"
UV="$VENV/bin/uv"

# uv that works, for bootstrapping .venv only; afterwards always "$UV".
bootstrap_uv() {
  if "$PY" -m uv --version >/dev/null 2>&1; then
    BOOT_UV=("$PY" -m uv)
    return
  fi
  log "uv not found; installing it with pip --user"
  "$PY" -m pip install --user --quiet uv 2>/dev/null \
    || "$PY" -m pip install --user --quiet --break-system-packages uv \
    || die "could not install uv with pip; install it (pip install uv) and re-run"
  "$PY" -m uv --version >/dev/null 2>&1 || die "uv installed but '$PY -m uv' does not run"
  BOOT_UV=("$PY" -m uv)
}

if ! { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c '' 2>/dev/null \
       && [ -x "$UV" ] && "$UV" --version >/dev/null 2>&1; }; then
  bootstrap_uv
  log "creating $VENV with $PY"
  rm -rf "$VENV"
  "${BOOT_UV[@]}" venv --quiet --python "$PY" "$VENV"
  "${BOOT_UV[@]}" pip install --quiet --python "$VENV/bin/python" uv
fi
# Never let uv fetch interpreters: combinations use the machine's, found by absolute path.
export UV_PYTHON_DOWNLOADS=never
# Every venv uv makes here (tooling, baked projects, upgrades) gets its .pyc files at install,
# as the baked Dockerfile does: where the environment sets PYTHONDONTWRITEBYTECODE, Python
# would otherwise compile every imported module from source at each process start (the
# baked service's CLI: 3.3 s of CPU a start instead of 1.0; the baked suite's
# tests/integration/test_cli.py took 87 s instead of 36).
export UV_COMPILE_BYTECODE=1
log "syncing tooling venv ($("$UV" --version))"
"$UV" pip install --quiet --python "$VENV/bin/python" -r pyproject.toml

# --- a browser for the admin page test ---------------------------------------------------
# The generated suite drives the admin page in Debian's headless Chromium (it skips that
# one test, saying why, when no browser can be had).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    log "installing chromium (Debian package) for the admin page test"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
      || log "WARNING: chromium could not be installed; the admin page test will be skipped"
  else
    log "WARNING: chromium is not installed and this is not root; the admin page test will be skipped"
  fi
fi

# --- services --------------------------------------------------------------------------
log "starting PostgreSQL, Kafka and Kafka Connect (scripts/services-up.sh --with-connect)"
services_env="$("$ROOT/scripts/services-up.sh" --with-connect)" || die "scripts/services-up.sh failed (see above)"
eval "$services_env"
: "${TEST_DATABASE_URL:?services-up.sh did not export TEST_DATABASE_URL}"
: "${TEST_KAFKA_BOOTSTRAP_SERVERS:?services-up.sh did not export TEST_KAFKA_BOOTSTRAP_SERVERS}"
: "${TEST_CONNECT_URL:?services-up.sh did not export TEST_CONNECT_URL}"
export TEST_DATABASE_URL TEST_KAFKA_BOOTSTRAP_SERVERS TEST_CONNECT_URL
# Fault tests of the generated suites (tests/integration/test_faults.py and
# test_outage_wakeup.py, the guarantees suite, tests/guarantees) stop and restart the
# broker and the database with these.
export TEST_KAFKA_STOP_CMD="$ROOT/scripts/kafka.sh down"
export TEST_KAFKA_START_CMD="$ROOT/scripts/kafka.sh up"
export TEST_PG_STOP_CMD="$ROOT/scripts/postgres.sh down"
export TEST_PG_START_CMD="$ROOT/scripts/postgres.sh up"
# ... and crash and restart the Kafka Connect worker (Debezium boxes).
export TEST_CONNECT_KILL_CMD="$ROOT/scripts/connect.sh kill"
export TEST_CONNECT_START_CMD="$ROOT/scripts/connect.sh up"
# The guarantees suite's Kafka outage lasts 10 s here instead of 30 s (keeps the run short;
# GUARANTEES_FAST=0 for the full length).
export GUARANTEES_FAST="${GUARANTEES_FAST:-1}"
log "services: $TEST_DATABASE_URL, kafka $TEST_KAFKA_BOOTSTRAP_SERVERS, connect $TEST_CONNECT_URL"

# --- tests -----------------------------------------------------------------------------
unset VIRTUAL_ENV PYTHONPATH PYTHONHOME
log "running pytest $*"
set +e
"$VENV/bin/python" -m pytest "$@"
rc=$?
set -e
log "pytest exited with $rc after $((SECONDS - START))s total (services left running; stop: scripts/services-down.sh)"
exit "$rc"
