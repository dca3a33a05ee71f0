from __future__ import annotations

import os
import subprocess
import sys

from {{ cookiecutter.package_name }}.container import Container

from ..support import PROJECT_ROOT, service_env


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "{{ cookiecutter.package_name }}.cli", *args],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_settings_stop_the_process_with_their_names() -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS")
    }
    result = run_cli("check-config", env=env)
    assert result.returncode == 2
    assert "DATABASE_URL is not set" in result.stderr
    assert "KAFKA_BOOTSTRAP_SERVERS is not set" in result.stderr


def test_check_config_lists_the_boxes(container: Container) -> None:
    result = run_cli("check-config", env=service_env(container))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("outbox {{ cookiecutter.outbox_item }}_outbox_item: table {{ cookiecutter.outbox_item }}_outbox_items, {{ cookiecutter.bucket_count }} buckets")
    assert lines[1].startswith("inbox  {{ cookiecutter.inbox_item }}_inbox_item: table {{ cookiecutter.inbox_item }}_inbox_items")


def test_a_broken_boxes_file_is_reported_with_its_key(
    container: Container, tmp_path: object
) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    broken = tmp_path / "boxes.yaml"
    broken.write_text("outbox:\n  x_box:\n    item_class: nope\n    transports: []\n")
    result = run_cli("check-config", env=service_env(container, BOXES_FILE=str(broken)))
    assert result.returncode == 2
    assert "outbox.x_box.item_class" in result.stderr
    assert "outbox.x_box.transports" in result.stderr


def test_an_unknown_box_is_refused(container: Container) -> None:
    result = run_cli("worker", "--box", "nope", env=service_env(container))
    assert result.returncode == 2
    assert "unknown box 'nope'" in result.stderr


def test_migrate_is_idempotent(container: Container) -> None:
    result = run_cli("migrate", env=service_env(container))
    assert result.returncode == 0, result.stderr
