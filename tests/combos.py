"""The option combinations the template supports (each is baked, linted, type-checked) and
the answers it must refuse before generating anything.

Answers not given here take cookiecutter.json's defaults (the first choice of a list).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Combo:
    id: str
    answers: dict[str, Any] = field(default_factory=dict)
    # Every combination runs the baked project's own test suite. With full_suite, all of
    # it; otherwise without its fault-injection tests (`slow`) and the guarantees suite,
    # which kill and restart processes and services for minutes and test engine code that
    # is the same in every combination (TEMPLATE_ALL_SUITES=1 runs them everywhere).
    # Every combination also runs `migrate` and `check-config`.
    full_suite: bool = False
    # With full_suite: also the guarantees suite (service processes under ten faults, about
    # eight minutes), else only the fault-injection tests.
    guarantees: bool = False
    # Without full_suite: only these paths of the baked suite (those the bake has), unless
    # TEMPLATE_ALL_SUITES=1. The engine is the same bytes in every combination
    # (tests/test_engine_package.py) and the default runs all of its suite, so the other
    # combinations run what their options can change: SMOKE below.
    modules: tuple[str, ...] = ()
    # Also start `<slug> api` and wait for /readyz.
    run_api: bool = False


# What a combination's options can change, run on each non-default combination: the unit
# tests; a relay, an inbox, creation, fencing and the flush on real services (the Python
# version, the names, the partition strategy reach them); migrations and autogenerate (the
# item tables and the example's); the service's processes, CLI, API and test helpers (the
# wiring that telemetry and the example domain change); and the options' own modules
# (the example domain, OpenTelemetry) where the bake has them.
SMOKE = (
    "tests/unit",
    "tests/properties",
    "tests/integration/test_relay.py",
    "tests/integration/test_claim_plan.py",
    "tests/integration/test_inbox.py",
    "tests/integration/test_create.py",
    "tests/integration/test_fencing.py",
    "tests/integration/test_flush_rules.py",
    "tests/integration/test_kafka_producer.py",
    "tests/integration/test_migrations.py",
    "tests/integration/test_autogenerate.py",
    "tests/integration/test_startup_health.py",
    "tests/integration/test_probes.py",
    "tests/integration/test_cli.py",
    "tests/integration/test_asyncapi.py",
    "tests/integration/test_admin_api.py",
    "tests/integration/test_testing_helpers.py",
    "tests/integration/test_orders.py",
    "tests/integration/test_payments.py",
    "tests/integration/test_tracing.py",
    "tests/integration/test_otlp_logs.py",
)

SUPPORTED: tuple[Combo, ...] = (
    Combo("default", full_suite=True, guarantees=True, run_api=True),
    Combo(
        "hash-no-example",
        {"partition_strategy": "hash", "include_example_domain": False},
        # generate writes into items.py and boxes.yaml, which differ without the example.
        modules=(*SMOKE, "tests/integration/test_generate.py"),
    ),
    Combo("no-otel-gitlab", {"opentelemetry": False, "ci": "gitlab"}, modules=SMOKE),
    Combo("py311-ci-none", {"python_version": "3.11", "ci": "none"}, modules=SMOKE),
    Combo(
        "py313-custom-names",
        {
            "python_version": "3.13",
            "project_name": "Billing Hub",
            "outbox_item": "invoice",
            "inbox_item": "refund",
            "bucket_count": "64",
        },
        modules=SMOKE,
    ),
)


@dataclass(frozen=True)
class Unsupported:
    id: str
    answers: dict[str, Any]
    # What the pre-generation hook must say (a fragment of its message on stderr).
    message: str


UNSUPPORTED: tuple[Unsupported, ...] = (
    Unsupported(
        "slug-uppercase",
        {"project_slug": "Order_Service"},
        "project_slug 'Order_Service' is not valid",
    ),
    Unsupported(
        "slug-double-hyphen", {"project_slug": "order--service"}, "project_slug 'order--service'"
    ),
    Unsupported("package-stdlib", {"package_name": "json"}, "package_name 'json' would shadow"),
    Unsupported(
        "package-dependency", {"package_name": "fastapi"}, "package_name 'fastapi' would shadow"
    ),
    Unsupported(
        "package-keyword",
        {"package_name": "class"},
        "package_name 'class' is not a valid Python package name",
    ),
    Unsupported("buckets-zero", {"bucket_count": "0"}, "bucket_count '0' must be a whole number"),
    Unsupported(
        "buckets-too-many", {"bucket_count": "5000"}, "bucket_count '5000' must be a whole number"
    ),
    Unsupported(
        "buckets-not-a-number", {"bucket_count": "abc"}, "bucket_count 'abc' must be a whole number"
    ),
    Unsupported(
        "outbox-item-uppercase", {"outbox_item": "Order"}, "outbox_item 'Order' is not valid"
    ),
    Unsupported("inbox-item-keyword", {"inbox_item": "import"}, "inbox_item 'import' is not valid"),
)
