"""The report prints the command that makes its run again (bench/cli.replay_command): a
second run meant to show whether the ratios reproduce must use the first run's method, and
the method is in the flags (repeats, seed, quiet waits, systems, scenarios). Every flag that
changes what is measured is named when it is not the default; a default stays implicit only
where leaving it out gives the same run."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
from bench import cli


def _replay(*argv: str, repeats: int = 3, seed: int = 51134, wait: float = 20.0) -> str:
    return cli.replay_command(cli.parse_args(list(argv)), repeats, seed, wait)


def test_a_full_run_names_repeats_seed_and_quiet_wait() -> None:
    assert _replay("--quiet-wait", "20") == (
        "./bench/run.sh --repeats 3 --seed 51134 --quiet-wait 20"
    )


def test_the_resolved_quiet_wait_is_printed_even_when_defaulted() -> None:
    # The default quiet wait (60 s, quick 0) is resolved by bench/__main__; the command gets
    # the resolved value, so a later change of the default cannot change a replay.
    assert _replay(wait=60.0).endswith("--quiet-wait 60")
    assert _replay("--quick", repeats=2, seed=7, wait=0.0) == (
        "./bench/run.sh --quick --repeats 2 --seed 7 --quiet-wait 0"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--no-debezium",), "--no-debezium"),
        (("--quick", "--debezium"), "--debezium"),
        (("--peers", "none"), "--peers none"),
        (("--scenarios", "inbox,drain"), "--scenarios inbox,drain"),
        (("--wait-quiet", "5"), "--wait-quiet 5"),
    ],
)
def test_a_flag_off_its_default_is_kept(argv: tuple[str, ...], expected: str) -> None:
    command = _replay(*argv)
    assert f" {expected} " in f"{command} ", command
    # ...and the command parses back to the same flags.
    again = cli.parse_args(command.split()[1:])
    first = cli.parse_args(list(argv))
    for name in ("quick", "peers", "debezium", "selected", "wait_quiet"):
        assert getattr(again, name) == getattr(first, name), name


def test_defaults_stay_implicit() -> None:
    command = _replay("--debezium", "--wait-quiet", "30")
    assert "--debezium" not in command
    assert "--wait-quiet" not in command
    assert "--scenarios" not in command
    assert "--peers" not in command
