"""`Observer.observes` (observability/observer.py): the relay skips the per-item calls and
lists that only feed a hook the observer's class does not override."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from outbox_engine.config.registry import Box
from outbox_engine.observability.observer import Observer
from outbox_engine.transports.base import ItemRecord

# The hooks the relay skips for an observer that does not override them.
HOOKS = ("processing", "publishing", "outcomes")


class CountsOutcomes(Observer):
    def outcomes(self, box: Box, results: Sequence[tuple[ItemRecord, str]], seconds: float) -> None:
        pass


class CountsMore(CountsOutcomes):
    """A subclass of a subclass keeps what its parent overrides."""


def test_the_base_observer_observes_nothing() -> None:
    assert [Observer().observes(hook) for hook in HOOKS] == [False, False, False]


def test_a_subclass_observes_what_it_overrides_and_only_that() -> None:
    assert [CountsOutcomes().observes(hook) for hook in HOOKS] == [False, False, True]
    assert [CountsMore().observes(hook) for hook in HOOKS] == [False, False, True]


def test_a_name_that_is_no_hook_is_an_error_not_false() -> None:
    with pytest.raises(AttributeError):
        Observer().observes("procesing")
