"""The benchmark's Debezium system (bench/debezium.py) without services: when it runs, which
cases it runs, and the boxes file it runs with.

- `ours-debezium` runs by default in a full run and not in a quick one (the quick test,
  tests/test_bench_quick.py, expects ours and the baseline only), unless `--debezium`;
  `--no-debezium` leaves it out. bench/run.sh starts Kafka Connect by the same rule.
- It runs one drain case (w1: the connector has one task), every steady rate and the create
  cost, never the inbox scenario; ours keeps every case.
- Its boxes file is the project's own with `relay: debezium` added to the outbox box only.

The end-to-end run (`./bench/run.sh --quick --debezium`) needs Kafka Connect and is the
lead's; these checks are what can silently break the lineup.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from conftest import REPO_ROOT


def bench(module: str) -> ModuleType:
    """A module of the bench package (bench/ is not on the tests' path; loaded by name so
    that mypy does not type-check the harness, which runs in its own venv)."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module(f"bench.{module}")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], True),
        (["--quick"], False),
        (["--quick", "--debezium"], True),
        (["--no-debezium"], False),
        (["--quick", "--no-debezium"], False),
    ],
)
def test_ours_debezium_runs_in_full_runs_and_on_request(argv: list[str], expected: bool) -> None:
    assert bench("cli").parse_args(argv).debezium is expected


@pytest.mark.parametrize(
    ("argv", "connect"),
    [
        ([], True),
        (["--quick"], False),
        (["--quick", "--debezium"], True),
        (["--no-debezium"], False),
        (["--seed", "7", "--quick", "--docs"], False),
    ],
)
def test_run_sh_starts_connect_by_the_same_rule(argv: list[str], connect: bool) -> None:
    """run.sh's own argument scan, run as bash on the same arguments as the CLI rule."""
    script = (REPO_ROOT / "bench" / "run.sh").read_text()
    scan = script.split('with_connect=1 quick=0 debezium=""', 1)[1].split(
        '\nif [ "$with_connect" = 1 ]', 1
    )[0]
    result = subprocess.run(
        [
            "bash",
            "-c",
            'with_connect=1 quick=0 debezium=""' + scan + '\necho "$with_connect"',
            "run.sh",
            *argv,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == ("1" if connect else "0")
    assert bench("cli").parse_args(argv).debezium is connect


def _system(name: str, **fields: Any) -> Any:
    systems = bench("systems")
    return systems.System(name, Path("python"), "driver.py", {}, **fields)


def test_ours_debezium_runs_one_drain_case_steady_and_cost_but_no_inbox(tmp_path: Path) -> None:
    registry, sizes = bench("registry"), bench("sizes")
    debezium = _system("ours-debezium", boxes_file=tmp_path / "boxes.yaml")
    ours = _system("ours", inbox=True)
    assert debezium.debezium
    assert not ours.debezium
    runs: dict[str, list[str]] = {"ours": [], "ours-debezium": []}
    for scenario in registry.SCENARIOS:
        for case in scenario.cases(sizes.FULL):
            for system in (ours, debezium):
                if scenario.applies(system, case):
                    runs[system.name].append(f"{scenario.name} {scenario.label(case)}".strip())
    assert runs["ours-debezium"] == ["drain w1", "steady 200/s", "steady 2000/s", "cost"]
    assert runs["ours"] == [
        "drain w1",
        "drain w2",
        "steady 200/s",
        "steady 2000/s",
        "inbox",
        "cost",
    ]
    # Its environment points the project at its own boxes file.
    env = debezium.env("postgresql+asyncpg://u:p@h/db")
    assert env["BOXES_FILE"] == str(tmp_path / "boxes.yaml")
    assert "BOXES_FILE" not in ours.env("postgresql+asyncpg://u:p@h/db")


BOXES = """\
# comment
outbox:
  order_outbox_item:
    item_class: order_service.items:OrderOutboxItem
    transports:
      - class: order_service.transports.order_outbox_item:OrderEventsKafkaTransport
        args:
          topic: "${ORDER_EVENTS_TOPIC:-orders}"

inbox:
  payment_inbox_item:
    item_class: order_service.items:PaymentInboxItem
    topics: ["${PAYMENT_EVENTS_TOPIC:-payments}"]
"""


def _project(root: Path, boxes: str) -> Any:
    (root / "config").mkdir(parents=True)
    (root / "config" / "boxes.yaml").write_text(boxes)
    return bench("envs").Project(
        root=root,
        python=root / ".venv" / "bin" / "python",
        slug="order-service",
        package="order_service",
        outbox_box="order_outbox_item",
        inbox_box="payment_inbox_item",
        outbox_topic_env="ORDER_EVENTS_TOPIC",
        inbox_topic_env="PAYMENT_EVENTS_TOPIC",
    )


def test_the_boxes_file_sets_relay_debezium_on_the_outbox_box_only(tmp_path: Path) -> None:
    project = _project(tmp_path / "project", BOXES)
    path = bench("debezium").boxes_file(project, tmp_path)
    written = path.read_text()
    loaded = yaml.safe_load(written)
    assert loaded["outbox"]["order_outbox_item"]["relay"] == "debezium"
    assert "relay" not in loaded["inbox"]["payment_inbox_item"]
    # Everything else as it was, line for line.
    assert written.replace("    relay: debezium\n", "", 1) == BOXES
    assert (project.root / "config" / "boxes.yaml").read_text() == BOXES


def test_a_boxes_file_without_the_outbox_box_is_refused(tmp_path: Path) -> None:
    project = _project(tmp_path / "project", BOXES.replace("order_outbox_item:", "other_box:"))
    with pytest.raises(RuntimeError, match="no single entry 'order_outbox_item:'"):
        bench("debezium").boxes_file(project, tmp_path)
