"""The benchmark harness runs end to end in its quick mode and finds nothing wrong.

`./bench/run.sh --quick` bakes the default project, installs it, and runs every scenario
at small sizes for it and the raw baseline on the real services: nothing lost, no per-key
order violations, no inbox row stored twice. It asserts nothing about speed. About two
minutes; deselect with `-k "not bench_quick"` (or TEMPLATE_SKIP_BENCH=1).
"""

from __future__ import annotations

import os

import pytest

from conftest import REPO_ROOT, Services, clean_env, run, tail

pytestmark = [pytest.mark.bake, pytest.mark.services]


@pytest.mark.skipif(os.environ.get("TEMPLATE_SKIP_BENCH") == "1", reason="TEMPLATE_SKIP_BENCH=1")
def test_bench_quick_is_correct(services: Services) -> None:
    result = run(
        [REPO_ROOT / "bench" / "run.sh", "--quick"],
        cwd=REPO_ROOT,
        env=clean_env(
            TEST_DATABASE_URL=services.database_url,
            TEST_KAFKA_BOOTSTRAP_SERVERS=services.kafka_bootstrap_servers,
        ),
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, tail(result.stdout, 80)
    assert "quick run: correct" in result.stdout, tail(result.stdout, 80)
    for scenario in ("drain ours w1", "drain ours w2", "steady ours", "inbox ours"):
        assert f"[bench] {scenario}" in result.stdout, tail(result.stdout, 80)
