"""Partition strategies: map an item's event key to a bucket in [0, bucket_count).

Both are stable across processes, hosts and Python versions (never Python's `hash()`,
which is salted per process).
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Callable
from typing import Literal

PartitionStrategyName = Literal["number", "hash"]


def hash_strategy(key: str) -> int:
    """A stable 32-bit hash of the key's UTF-8 bytes (CRC-32)."""
    return zlib.crc32(key.encode("utf-8"))


def number_strategy(key: str) -> int:
    """The digits of the key as a number (`order-123` -> 123).

    A key without digits falls back to the hash strategy rather than piling every such key
    into bucket 0.
    """
    digits = key if key.isascii() and key.isdigit() else _NOT_DIGITS.sub("", key)
    if not digits:
        return hash_strategy(key)
    return int(digits)


_NOT_DIGITS = re.compile(r"[^0-9]+")

STRATEGIES: dict[str, Callable[[str], int]] = {
    "number": number_strategy,
    "hash": hash_strategy,
}


@functools.lru_cache(maxsize=65_536)  # keys repeat: the inbox and create() ask per message
def bucket_for(key: str, strategy: str, bucket_count: int) -> int:
    try:
        fn = STRATEGIES[strategy]
    except KeyError:
        raise ValueError(
            f"unknown partition strategy {strategy!r}; use one of {sorted(STRATEGIES)}"
        ) from None
    return fn(key) % bucket_count
