#!/usr/bin/env bash
# THE benchmark command of the template repository:
#
#   ./bench/run.sh [--quick] [--repeats N] [--seed N] [--peers a,b|none] [--scenarios x,y]
#                  [--[no-]debezium] [--wait-quiet MIN] [--quiet-wait SEC] [--out DIR] [--docs]
#
# 1. ensures uv (the tooling venv .venv, as scripts/test.sh makes it) and the bench venv
#    (Python 3.12: cookiecutter, asyncpg, confluent-kafka, matplotlib);
# 2. starts (or reuses) PostgreSQL and Kafka without Docker (scripts/services-up.sh), and
#    Kafka Connect with Debezium for ours-debezium (--with-connect; not for --quick unless
#    --debezium, never with --no-debezium);
# 3. runs python -m bench: bakes the default project, installs it and the peers
#    (faststream-outbox, omni-box) into their own venvs, and runs every scenario through one
#    loop: interleaved per repeat, the order of the systems rotated per repeat from a printed
#    seed (--seed replays it), and before every timed run the run's database vacuumed and
#    analysed, PostgreSQL checkpointed and the machine given time to be quiet (bench/README.md).
#    Full runs (3 repeats by default) write docs/benchmarks.md, docs/benchmarks-results.json
#    and .csv (every repeat's values and ratios) and docs/img/*.png; --quick checks
#    correctness only (nothing lost, no order violations, every run settled) and writes
#    nothing unless --docs.
#
# Env: BENCH_CACHE_DIR (venvs, logs and results of the last run; default
#      ~/.cache/outbox-service-bench), PYTHON (bootstrap interpreter, default python3),
#      TEMPLATE_PYTHON_3_12 (the Python 3.12 to use).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[bench/run.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

PY="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')" || die "no working ${PYTHON:-python3}"
VENV="$ROOT/.venv"
UV="$VENV/bin/uv"
if ! { [ -x "$UV" ] && "$UV" --version >/dev/null 2>&1; }; then
  log "creating the tooling venv $VENV (uv)"
  if ! "$PY" -m uv --version >/dev/null 2>&1; then
    "$PY" -m pip install --user --quiet uv 2>/dev/null \
      || "$PY" -m pip install --user --quiet --break-system-packages uv \
      || die "could not install uv with pip"
  fi
  rm -rf "$VENV"
  "$PY" -m uv venv --quiet --python "$PY" "$VENV"
  "$PY" -m uv pip install --quiet --python "$VENV/bin/python" uv
fi
export UV_PYTHON_DOWNLOADS=never
# Every venv of the run (the bench's, the baked project's, the peers') gets its .pyc files at
# install, as a deployed service has them (the baked Dockerfile compiles): where the
# environment sets PYTHONDONTWRITEBYTECODE, each relay, load and consumer process would
# otherwise compile its imports from source at start (~3 s of CPU for ours), inside the
# steady scenario's start-up grace and beside the other system's timed runs.
export UV_COMPILE_BYTECODE=1

PY312="$("$VENV/bin/python" "$ROOT/bench/find_python.py" 3.12 "$UV")" \
  || die "Python 3.12 is needed (pyenv install 3.12, uv python install 3.12, or TEMPLATE_PYTHON_3_12)"
CACHE="${BENCH_CACHE_DIR:-$HOME/.cache/outbox-service-bench}"
BENCH_VENV="$CACHE/venvs/bench"
if ! { [ -x "$BENCH_VENV/bin/python" ] && "$BENCH_VENV/bin/python" -c '' 2>/dev/null; }; then
  log "creating the bench venv $BENCH_VENV ($PY312)"
  rm -rf "$BENCH_VENV"
  "$UV" venv --quiet --python "$PY312" "$BENCH_VENV"
fi
"$UV" pip install --quiet --python "$BENCH_VENV/bin/python" \
  "cookiecutter>=2.6" "asyncpg>=0.30" "confluent-kafka>=2.6" "matplotlib>=3.8" "pyyaml>=6"

# Kafka Connect for ours-debezium (bench/debezium.py): as bench/cli.py decides, on unless
# --no-debezium, or --quick without --debezium.
with_connect=1 quick=0 debezium=""
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --debezium) debezium=1 ;;
    --no-debezium) debezium=0 ;;
  esac
done
if [ "$debezium" = 0 ] || { [ "$quick" = 1 ] && [ -z "$debezium" ]; }; then with_connect=0; fi
if [ "$with_connect" = 1 ]; then
  log "starting PostgreSQL, Kafka and Kafka Connect (scripts/services-up.sh --with-connect)"
  services_env="$("$ROOT/scripts/services-up.sh" --with-connect)" || die "scripts/services-up.sh failed"
else
  log "starting PostgreSQL and Kafka (scripts/services-up.sh)"
  services_env="$("$ROOT/scripts/services-up.sh")" || die "scripts/services-up.sh failed"
fi
eval "$services_env"
export TEST_DATABASE_URL TEST_KAFKA_BOOTSTRAP_SERVERS
if [ "$with_connect" = 1 ]; then export TEST_CONNECT_URL; fi

unset VIRTUAL_ENV PYTHONPATH PYTHONHOME
export BENCH_UV="$UV" BENCH_PYTHON_3_12="$PY312" BENCH_CACHE_DIR="$CACHE"
exec "$BENCH_VENV/bin/python" -m bench "$@"
