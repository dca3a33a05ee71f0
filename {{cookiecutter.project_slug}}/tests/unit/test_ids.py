"""Message ids (creation/ids.py): UUID version 7, unique, ordered by their millisecond."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest

from outbox_engine import new_message_id

RANDOM_BITS = [*range(0, 62), *range(64, 76)]  # rand_b, then rand_a


def test_ids_are_version_7_with_the_rfc_variant_and_all_distinct() -> None:
    made = [new_message_id() for _ in range(20_000)]
    assert {u.version for u in made} == {7}
    assert {u.variant for u in made} == {uuid.RFC_4122}
    assert len(set(made)) == 20_000
    # uuid.UUID parses its own text back to the same id (a canonical form, as the inbox reads it)
    assert all(uuid.UUID(str(u)) == u for u in made[:100])


def test_every_one_of_the_74_random_bits_takes_both_values() -> None:
    made = [new_message_id().int for _ in range(2_000)]
    constant = [b for b in RANDOM_BITS if len({(v >> b) & 1 for v in made}) != 2]
    assert constant == []
    # and the fixed bits are fixed: version 0111 at 76-79, variant 10 at 62-63
    assert {(v >> 76) & 0xF for v in made} == {7}
    assert {(v >> 62) & 0b11 for v in made} == {0b10}


def test_the_id_starts_with_the_millisecond_it_was_made_in() -> None:
    before = time.time_ns() // 1_000_000
    made = new_message_id()
    after = time.time_ns() // 1_000_000
    assert before <= made.int >> 80 <= after


def test_ids_of_a_later_millisecond_sort_after_the_earlier_ones() -> None:
    rounds = []
    for _ in range(5):
        rounds.append([new_message_id() for _ in range(50)])
        time.sleep(0.003)
    for earlier, later in itertools.pairwise(rounds):
        assert max(earlier) < min(later)


@pytest.mark.parametrize(
    ("ms", "prefix"),
    [(0, 0), ((1 << 48) - 1, (1 << 48) - 1), (1 << 48, 0)],
    ids=["epoch", "last-48-bit-ms", "past-48-bits-wraps"],
)
def test_the_time_field_never_spills_into_the_version(
    monkeypatch: pytest.MonkeyPatch, ms: int, prefix: int
) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: ms * 1_000_000 + 999_999)
    made = new_message_id()
    assert made.int >> 80 == prefix
    assert made.version == 7
    assert made.variant == uuid.RFC_4122
