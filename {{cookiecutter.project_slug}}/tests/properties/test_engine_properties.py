"""Property tests: partitioning is stable and spreads keys, backoff respects its bounds, and
the retry state machine always leaves a path to delivered, failed or discarded."""

from __future__ import annotations

import random
import zlib
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from outbox_engine.config.boxes import BackoffConfig
from outbox_engine.config.partitioning import bucket_for, number_strategy
from outbox_engine.relay.retry import backoff_delay, decide

from ..support import OUTBOX_BOX, make_registry

# No per-example deadline: these are CPU-bound and CI shares its two cores with the
# services (a 200 ms deadline failed an example that took 335 ms once and 100 ms after).
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")

keys = st.text(min_size=1, max_size=64)
bucket_counts = st.integers(min_value=1, max_value=4096)


@given(key=keys, buckets=bucket_counts, strategy=st.sampled_from(["number", "hash"]))
def test_a_key_always_maps_to_the_same_bucket_in_range(
    key: str, buckets: int, strategy: str
) -> None:
    first = bucket_for(key, strategy, buckets)
    assert 0 <= first < buckets
    assert bucket_for(key, strategy, buckets) == first
    if strategy == "hash":
        assert first == zlib.crc32(key.encode()) % buckets  # a fixed, documented function
    else:
        digits = "".join(ch for ch in key if "0" <= ch <= "9")  # ASCII digits only
        expected = int(digits) if digits else zlib.crc32(key.encode())
        assert first == expected % buckets


@given(
    number=st.integers(min_value=0, max_value=10**18), prefix=st.text(alphabet="abc-_", max_size=5)
)
def test_number_strategy_reads_the_digits(number: int, prefix: str) -> None:
    assert number_strategy(f"{prefix}{number}") == number


@settings(max_examples=25)
@given(seed=st.integers(min_value=0, max_value=2**32), buckets=st.sampled_from([4, 16, 64]))
def test_hash_strategy_is_uniform_enough(seed: int, buckets: int) -> None:
    rng = random.Random(seed)
    counts = Counter(
        bucket_for(f"{rng.getrandbits(64):x}", "hash", buckets) for _ in range(buckets * 400)
    )
    expected = 400
    assert len(counts) == buckets
    assert max(abs(c - expected) for c in counts.values()) < expected * 0.35


backoffs = st.builds(
    BackoffConfig,
    min_seconds=st.floats(min_value=0.01, max_value=10),
    max_seconds=st.floats(min_value=10, max_value=3600),
    multiplier=st.floats(min_value=1, max_value=5),
    jitter=st.floats(min_value=0, max_value=0.99),
)


@given(config=backoffs, errors=st.integers(min_value=0, max_value=1000), seed=st.integers())
def test_backoff_stays_within_min_and_max(config: BackoffConfig, errors: int, seed: int) -> None:
    delay = backoff_delay(config, errors, random.Random(seed))
    assert config.min_seconds <= delay <= config.max_seconds


@given(
    max_retries=st.integers(min_value=0, max_value=20),
    outcomes=st.lists(st.sampled_from(["ok", "fail", "permanent", "unavailable"]), max_size=60),
)
def test_every_item_has_a_path_to_an_end_state(max_retries: int, outcomes: list[str]) -> None:
    """Replay any sequence of attempt outcomes: the item ends delivered or failed within
    max_retries + 1 counted attempts, and only outages are not counted."""
    config = make_registry(outbox={"max_retries": max_retries}).get(OUTBOX_BOX).config
    errors, state = 0, "pending"
    for outcome in outcomes:
        if state != "pending":
            break
        if outcome == "ok":
            state = "delivered"
        elif outcome == "unavailable":
            continue  # no attempt counted
        else:
            decision = decide(config, errors, permanent=outcome == "permanent")
            assert decision.errors_count == errors + 1
            errors = decision.errors_count
            if decision.give_up:
                state = "failed"
            else:
                assert decision.delay_seconds > 0
    assert errors <= max_retries + 1
    if state == "pending":
        # Still pending only while attempts remain: the next counted failure either retries
        # (within the limit) or ends the item.
        assert errors <= max_retries
        assert decide(config, errors, permanent=False).give_up == (errors + 1 > max_retries)
