"""The service's OpenTelemetry observer (telemetry/observer.py) overrides every hook the
relay skips for an observer that does not (`Observer.observes`): with telemetry on, each
item still gets its processing and publish spans and is counted."""

from __future__ import annotations

from {{ cookiecutter.package_name }}.telemetry.observer import OtelObserver

from .test_observer import HOOKS


def test_the_telemetry_observer_observes_every_hook_the_relay_skips() -> None:
    assert [OtelObserver().observes(hook) for hook in HOOKS] == [True, True, True]
