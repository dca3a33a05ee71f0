"""`./bench/reproduce.sh [COMMIT]` makes the published report's second run: in a fresh clone
at the commit that published the report, the command its results file records, word for
word; the run's results kept as docs/benchmarks-reproduction.json and compared with the
first by this checkout's bench.compare; whether the two started on different days said.

Tried on a throwaway repository whose bench/run.sh is a stand-in that records where and how
it was called and writes a given results file (a real run takes two hours): the default
commit when HEAD did not publish the report, the exact arguments, the clone's commit, the
compare's verdict and exit code, a same-day run, a recorded command that is not plain
options (never run), a run that writes no results, a dry run, a commit that is not one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from test_bench_compare import _spread

# Records its working directory, the clone's commit and its arguments, then writes the
# results file the test gives it (none when FAKE_SECOND is empty).
FAKE_RUN = """#!/usr/bin/env bash
set -euo pipefail
{ pwd; git rev-parse HEAD; printf '%s\\n' "$@"; } > "$BENCH_CACHE_DIR/run-args.txt"
if [ -n "${FAKE_SECOND:-}" ]; then
  mkdir -p "$BENCH_CACHE_DIR/last-run"
  cp "$FAKE_SECOND" "$BENCH_CACHE_DIR/last-run/results.json"
fi
if [ -n "${FAKE_REPORT:-}" ]; then
  cp "$FAKE_REPORT" docs/benchmarks-results.json
fi
"""

COMMAND = "./bench/run.sh --repeats 3 --seed 51134 --quiet-wait 20 --peers=none"


def _results(started: str, w1: float, w2: float, command: str = COMMAND) -> str:
    spreads = [_spread("drain", "w1", "baseline", w1), _spread("drain", "w2", "baseline", w2)]
    return json.dumps({"started": started, "command": command, "spreads": spreads})


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose second commit publishes a report and whose third changes a doc
    only; returns it and the publishing commit."""
    root = tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    (root / "docs").mkdir()
    for name in ("reproduce.sh", "compare.py", "__init__.py"):
        shutil.copy(REPO_ROOT / "bench" / name, root / "bench" / name)
    run = root / "bench" / "run.sh"
    run.write_text(FAKE_RUN)
    run.chmod(0o755)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "bench")
    (root / "docs" / "benchmarks-results.json").write_text(_results("2026-12-03 15:27", 1.0, 0.8))
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "the report")
    published = _git(root, "rev-parse", "HEAD")
    (root / "README.md").write_text("a later doc change\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "doc")
    return root, published


def _reproduce(
    root: Path, tmp_path: Path, second: str | None, *args: str, report: str | None = None
) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "second.json"
    if second is not None:
        fake.write_text(second)
    fake_report = tmp_path / "report.json"
    if report is not None:
        fake_report.write_text(report)
    env = {
        **os.environ,
        "BENCH_CACHE_DIR": str(tmp_path / "cache"),
        "FAKE_SECOND": str(fake) if second is not None else "",
        "FAKE_REPORT": str(fake_report) if report is not None else "",
        "PYTHON": shutil.which("python3") or "python3",
    }
    (tmp_path / "cache").mkdir(exist_ok=True)
    return subprocess.run(
        [str(root / "bench" / "reproduce.sh"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_second_run_in_a_clone_of_the_publishing_commit(
    repo: tuple[Path, str], tmp_path: Path
) -> None:
    root, published = repo
    second = _results("2026-12-04 09:10", 1.1, 0.6)  # w1 +10%: within; w2 -25%: not
    done = _reproduce(root, tmp_path, second)
    assert done.returncode == 1, done.stderr  # bench.compare's: one ratio not within
    assert f"{_git(root, 'rev-parse', 'HEAD')[:12]} did not change" in done.stderr
    called = (tmp_path / "cache" / "run-args.txt").read_text().splitlines()
    clone = tmp_path / "cache" / "reproduce" / f"clone-{published[:12]}"
    assert called == [
        str(clone),
        published,
        "--repeats",
        "3",
        "--seed",
        "51134",
        "--quiet-wait",
        "20",
        "--peers=none",
    ]
    kept = root / "docs" / "benchmarks-reproduction.json"
    assert json.loads(kept.read_text())["started"] == "2026-12-04 09:10"
    assert "another calendar day than the first run (2026-12-03 -> 2026-12-04)" in done.stderr
    assert "| drain | w1 | baseline | 1.00x" in done.stdout
    assert "1 of 2 ratios within 15%." in done.stdout

    # --out elsewhere (relative to the caller), a second run that reproduces: exit 0.
    again = _reproduce(
        root, tmp_path, _results("2026-12-05 01:00", 1.05, 0.85), "--out", "out/r.json"
    )
    assert again.returncode == 0, again.stderr
    assert "2 of 2 ratios within 15%." in again.stdout
    assert json.loads((tmp_path / "out" / "r.json").read_text())["started"] == "2026-12-05 01:00"


def test_a_same_day_run_is_said_not_to_be_the_rules(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, published = repo
    done = _reproduce(root, tmp_path, _results("2026-12-03 19:40", 1.0, 0.8), published)
    assert done.returncode == 0, done.stderr
    assert "did not change" not in done.stderr
    assert "the same calendar day as the first run (2026-12-03): not the rule's" in done.stderr


@pytest.mark.parametrize(
    "command",
    [
        "./bench/run.sh --repeats 3; touch /tmp/reproduce-pwned",
        "./bench/run.sh --out $(touch /tmp/reproduce-pwned)",
        "python3 -c print(1)",
        "",
    ],
)
def test_a_recorded_command_that_is_not_plain_options_is_not_run(
    repo: tuple[Path, str], tmp_path: Path, command: str
) -> None:
    root, _ = repo
    (root / "docs" / "benchmarks-results.json").write_text(
        _results("2026-12-03 15:27", 1.0, 0.8, command)
    )
    _git(root, "commit", "-q", "-am", "an edited report")
    done = _reproduce(root, tmp_path, _results("2026-12-04 09:10", 1.0, 0.8))
    assert done.returncode == 3
    assert "ERROR" in done.stderr
    assert not (tmp_path / "cache" / "run-args.txt").exists()
    assert not Path("/tmp/reproduce-pwned").exists()


def test_a_run_that_writes_no_results_and_the_dry_run(
    repo: tuple[Path, str], tmp_path: Path
) -> None:
    root, published = repo
    none = _reproduce(root, tmp_path, None)
    assert none.returncode == 3
    assert "the run wrote no new" in none.stderr
    assert not (root / "docs" / "benchmarks-reproduction.json").exists()

    (tmp_path / "cache" / "run-args.txt").unlink()
    dry = _reproduce(root, tmp_path, _results("2026-12-04 09:10", 1.0, 0.8), "--dry-run")
    assert dry.returncode == 0
    assert f"first run: the report of {published[:12]}, started 2026-12-03 15:27" in dry.stderr
    assert "command:   ./bench/run.sh --repeats 3" in dry.stderr
    assert not (tmp_path / "cache" / "run-args.txt").exists()

    missing = _reproduce(root, tmp_path, None, "0123456789abcdef")
    assert missing.returncode == 3
    assert "0123456789abcdef is not a commit of this repository" in missing.stderr


def test_the_report_the_run_wrote_in_the_clone_is_kept_over_the_last_runs_results(
    repo: tuple[Path, str], tmp_path: Path
) -> None:
    """A full run of a commit before the last run's results.json said when and where it ran
    writes those facts only into the report results file in its clone: that one is kept."""
    root, _ = repo
    bare = json.loads(_results("", 1.0, 0.8))
    del bare["started"], bare["command"]
    done = _reproduce(
        root, tmp_path, json.dumps(bare), report=_results("2026-12-04 08:18", 1.1, 0.85)
    )
    assert done.returncode == 0, done.stderr
    kept = json.loads((root / "docs" / "benchmarks-reproduction.json").read_text())
    assert kept["started"] == "2026-12-04 08:18"
    assert "second run started 2026-12-04 08:18 UTC" in done.stderr
    assert "| drain | w1 | baseline | 1.00x" in done.stdout
    assert "2 of 2 ratios within 15%." in done.stdout
