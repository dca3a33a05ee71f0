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
    # Test modules of the baked suite this combination leaves out (unless
    # TEMPLATE_ALL_SUITES=1): only where its options do not touch the code they test and
    # other combinations run them; they start hundreds of CLI processes (minutes each).
    skip_modules: tuple[str, ...] = ()
    # Also start `<slug> api` and wait for /readyz.
    run_api: bool = False


# The operator CLI's end-to-end modules (hundreds of CLI processes): the same code whatever
# the telemetry, CI, Python or naming choice; the default and hash-no-example run them.
CLI_HEAVY = (
    "tests/integration/test_ops_cli.py",
    "tests/integration/test_cli_batches.py",
    "tests/integration/test_generate.py",
)

SUPPORTED: tuple[Combo, ...] = (
    Combo("default", full_suite=True, guarantees=True, run_api=True),
    Combo("hash-no-example", {"partition_strategy": "hash", "include_example_domain": False}),
    Combo("no-otel-gitlab", {"opentelemetry": False, "ci": "gitlab"}, skip_modules=CLI_HEAVY),
    Combo("py311-ci-none", {"python_version": "3.11", "ci": "none"}, skip_modules=CLI_HEAVY),
    Combo(
        "py313-custom-names",
        {
            "python_version": "3.13",
            "project_name": "Billing Hub",
            "outbox_item": "invoice",
            "inbox_item": "refund",
            "bucket_count": "64",
        },
        skip_modules=CLI_HEAVY,
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
