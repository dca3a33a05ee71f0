from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from outbox_engine.config.partitioning import (
    bucket_for,
    hash_strategy,
    number_strategy,
)


def test_number_strategy_uses_the_digits_of_the_key() -> None:
    assert number_strategy("123") == 123
    assert number_strategy("order-52523") == 52523
    assert bucket_for("some-chars-123", "number", 16) == 123 % 16


def test_number_strategy_without_digits_falls_back_to_the_hash() -> None:
    assert number_strategy("abc") == hash_strategy("abc")


def test_hash_strategy_is_stable_across_processes() -> None:
    # Python's hash() is salted per process; ours must not be.
    code = (
        "from outbox_engine.config.partitioning import hash_strategy;"
        "print(hash_strategy('customer-42'))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(3)
    }
    assert outputs == {str(hash_strategy("customer-42"))}
    assert hash_strategy("customer-42") == 1241360405  # CRC-32 (IEEE), fixed forever


def test_hash_strategy_spreads_uuid_like_keys_evenly() -> None:
    counts = Counter(bucket_for(f"{i:08x}-key", "hash", 16) for i in range(16_000))
    assert len(counts) == 16
    assert min(counts.values()) > 800
    assert max(counts.values()) < 1200


def test_unknown_strategy_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown partition strategy 'modulo'"):
        bucket_for("1", "modulo", 4)


def _digits_reference(key: str) -> int:
    """The number strategy as specified: the ASCII digits of the key, else the hash."""
    digits = "".join(ch for ch in key if "0" <= ch <= "9")
    return int(digits) if digits else hash_strategy(key)


def test_number_strategy_matches_its_definition_on_awkward_keys() -> None:
    keys = [
        "0",
        "007",
        "a1b2c3",
        "order-\u0663\u0664-9",
        "\u00b2\u00b3",
        "x",
        "",
        "12 34",
        "9" * 40,
    ]
    for key in keys:
        assert number_strategy(key) == _digits_reference(key), key
        assert bucket_for(key, "number", 16) == _digits_reference(key) % 16, key
