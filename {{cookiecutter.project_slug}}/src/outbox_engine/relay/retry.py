"""Retry decisions: backoff delays and whether a failed attempt ends the item."""

from __future__ import annotations

import random
from dataclasses import dataclass

from outbox_engine.config.boxes import BackoffConfig, BoxConfig


def backoff_delay(
    config: BackoffConfig, errors_count: int, rng: random.Random | None = None
) -> float:
    """Seconds to wait after the `errors_count`-th failed attempt (1-based).

    min * multiplier^(n-1), jittered by +/- jitter, and always within [min, max].
    """
    attempt = max(errors_count, 1)
    base = config.min_seconds * config.multiplier ** min(attempt - 1, 64)
    base = min(base, config.max_seconds)
    jitter = (rng or random).uniform(-config.jitter, config.jitter) if config.jitter else 0.0
    return min(max(base * (1.0 + jitter), config.min_seconds), config.max_seconds)


@dataclass(frozen=True, slots=True)
class RetryDecision:
    errors_count: int
    give_up: bool
    delay_seconds: float


def decide(config: BoxConfig, previous_errors: int, permanent: bool) -> RetryDecision:
    """What a failed attempt does to an item that had `previous_errors` failures before."""
    errors = previous_errors + 1
    if permanent or errors > config.max_retries:
        return RetryDecision(errors, True, 0.0)
    if "exponential_backoff" in config.retry_strategies:
        return RetryDecision(errors, False, backoff_delay(config.backoff, errors))
    # Without backoff the item waits one poll interval, so a broken item cannot spin.
    return RetryDecision(errors, False, config.poll_interval)
