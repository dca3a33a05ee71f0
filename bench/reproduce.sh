#!/usr/bin/env bash
# The published report's second run, made the way the reproduction rule asks for it:
#
#   ./bench/reproduce.sh [--dry-run] [--out FILE] [COMMIT]
#
# COMMIT names the first run: the report docs/benchmarks-results.json holds at COMMIT
# (default HEAD: the published report), made by the last commit up to COMMIT that changed
# that file, whose code is the code that report measured. In a fresh clone of this
# repository at that commit (under $BENCH_CACHE_DIR/reproduce/), this runs the command that the
# results file records (`command`, the report's `Command:` line: `./bench/run.sh ...`), so
# the second run has the first's engine, method, repeats, seed and quiet waits. Then it
# copies the run's results file (the clone's report results file the run rewrote, else the
# last run's results.json) to FILE (default docs/benchmarks-reproduction.json in this
# checkout) and prints `python -m bench.compare FIRST FILE`, using this checkout's
# bench/compare.py (how ratios are counted may have improved since COMMIT; what is measured
# is COMMIT's).
#
# The rule's second run is on another calendar day than the first: the script prints both
# runs' start (UTC) and says whether the days differ. It runs either way (a same-day run
# still tells how far the ratios move), but a same-day run is not the rule's second run.
#
# --dry-run: resolve and print the commit, the command and the clone's path; run nothing.
# Exit code: bench.compare's (0: every counted ratio within 15%; 1: one is not; 2: nothing
# to compare), or non-zero with a message when the run or a step before it fails.
# Env: BENCH_CACHE_DIR (default ~/.cache/outbox-service-bench; bench/run.sh writes the run's
#      results.json under its last-run/), PYTHON (for bench.compare, default python3).
set -euo pipefail

CALLER="$PWD"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[bench/reproduce.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 3; }

DRY=0
OUT="$ROOT/docs/benchmarks-reproduction.json"
COMMIT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) [ $# -ge 2 ] || die "--out needs a file"; OUT="$(cd "$CALLER" && realpath -m "$2")"; shift ;;
    -h|--help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$COMMIT" ] || die "one COMMIT only"; COMMIT="$1" ;;
  esac
  shift
done

PY="${PYTHON:-python3}"
# A results file's top-level text field ($2), or $3 when it has none.
field() {
  "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]) or sys.argv[3])' "$1" "$2" "$3"
}
RESULTS=docs/benchmarks-results.json
GIVEN="${COMMIT:-HEAD}"
RESOLVED="$(git rev-parse --verify --quiet "$GIVEN^{commit}")" \
  || die "$GIVEN is not a commit of this repository (a shallow clone? fetch the history)"
# The commit that published the report GIVEN has (GIVEN itself when it did): its code is
# the code the report measured, and its results file is the first run.
COMMIT="$(git log -n 1 --format=%H "$RESOLVED" -- "$RESULTS")"
[ -n "$COMMIT" ] || die "no commit up to ${RESOLVED:0:12} changed $RESULTS (a shallow clone? fetch the history)"
[ "$COMMIT" = "$RESOLVED" ] \
  || log "${RESOLVED:0:12} did not change $RESULTS: its report is the one ${COMMIT:0:12} published"

CACHE="${BENCH_CACHE_DIR:-$HOME/.cache/outbox-service-bench}"
WORK="$CACHE/reproduce"
mkdir -p "$WORK"
FIRST="$WORK/first-${COMMIT:0:12}.json"
git show "$COMMIT:$RESULTS" > "$FIRST" 2>/dev/null \
  || die "commit ${COMMIT:0:12} has no $RESULTS: it published no report"

# The recorded command, checked word by word: it is run, so it must be bench/run.sh with
# plain options (a results file edited by hand gets no shell).
COMMAND="$(field "$FIRST" command "")" \
  || die "$RESULTS of ${COMMIT:0:12} is not JSON"
[ -n "$COMMAND" ] || die "$RESULTS of ${COMMIT:0:12} records no command (a report older than the Command: line)"
read -r -a ARGS <<< "$COMMAND"
[ "${ARGS[0]}" = "./bench/run.sh" ] || die "the recorded command does not start with ./bench/run.sh: $COMMAND"
for word in "${ARGS[@]:1}"; do
  [[ "$word" =~ ^[A-Za-z0-9][A-Za-z0-9.,_-]*$ || "$word" =~ ^--[a-z][a-z0-9-]*(=[A-Za-z0-9.,_-]+)?$ ]] \
    || die "the recorded command has a word that is not a plain option or value: '$word'"
done
FIRST_STARTED="$(field "$FIRST" started "?")"
CLONE="$WORK/clone-${COMMIT:0:12}"

log "first run: the report of ${COMMIT:0:12}, started $FIRST_STARTED UTC"
log "command:   $COMMAND"
log "clone:     $CLONE (at ${COMMIT:0:12})"
log "results:   $OUT"
if [ "$DRY" = 1 ]; then
  log "dry run: nothing run"
  exit 0
fi

rm -rf "$CLONE"
git clone --quiet --no-checkout "$ROOT" "$CLONE"
git -C "$CLONE" checkout --quiet --detach "$COMMIT"
MARK="$WORK/.started-${COMMIT:0:12}"
touch "$MARK"
log "running the command in the clone (a full run takes about two hours)"
(cd "$CLONE" && BENCH_CACHE_DIR="$CACHE" "${ARGS[@]}")
# The run's report results file (a full run writes it in the clone) says when the run
# started, on which machine and with which command; the results.json of the last run says so
# only for runs of commits since that was added to it, so it is the fallback.
SECOND=""
for written in "$CLONE/$RESULTS" "$CACHE/last-run/results.json"; do
  if [ -f "$written" ] && [ "$written" -nt "$MARK" ]; then SECOND="$written"; break; fi
done
[ -n "$SECOND" ] || die "the run wrote no new $CLONE/$RESULTS nor $CACHE/last-run/results.json"
mkdir -p "$(dirname "$OUT")"
cp "$SECOND" "$OUT"

SECOND_STARTED="$(field "$OUT" started "?")"
log "second run started $SECOND_STARTED UTC; kept as $OUT"
if [ "${FIRST_STARTED%% *}" = "${SECOND_STARTED%% *}" ]; then
  log "the same calendar day as the first run (${FIRST_STARTED%% *}): not the rule's second run"
else
  log "another calendar day than the first run (${FIRST_STARTED%% *} -> ${SECOND_STARTED%% *})"
fi
status=0
"$PY" -m bench.compare "$FIRST" "$OUT" || status=$?
exit "$status"
