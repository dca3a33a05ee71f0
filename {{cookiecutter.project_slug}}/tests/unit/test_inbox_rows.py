"""A Kafka message's inbox id (inbox/rows.py): the canonical-text fast path names every
message exactly as `message_uuid` does, whatever form or case its id header takes.

The fast path skips `uuid.UUID` for an id header already in the 8-4-4-4-12 form. If it
accepted a form `uuid.UUID` reads differently (or rejects), a redelivery after an upgrade
would get another id and be stored twice; these tests hold it to the full function's
result for the forms a producer can send.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Message

from outbox_engine.inbox.rows import message_row, message_uuid

from ..support import INBOX_BOX, make_registry

SAMPLE = uuid.UUID("0f8e3c2a-9b1d-4e7f-8a6b-5c4d3e2f1a0b")

FORMS = [
    str(SAMPLE),  # canonical
    str(SAMPLE).upper(),
    "0F8e3C2a-9B1d-4E7f-8A6b-5C4d3E2f1A0b",
    "{" + str(SAMPLE) + "}",
    "urn:uuid:" + str(SAMPLE),
    SAMPLE.hex,
    SAMPLE.hex.upper(),
    " " + str(SAMPLE),  # not the form: parsed in full (it fails, so derived)
    str(SAMPLE) + "\n",
    "0f8e3c2a9b1d-4e7f-8a6b-5c4d-3e2f1a0b",  # hyphens elsewhere
    "0f8e3c2a-9b1d-4e7f-8a6b-5c4d3e2f1a0g",  # not hex
    "\u0660f8e3c2a-9b1d-4e7f-8a6b-5c4d3e2f1a0b",  # an Arabic-Indic zero: int() reads it
    "0f8e3c2a-9b1d-4e7f-8a6b-5c4d3e2f1a0",  # one digit short
    "an idempotency key of any text",
]


def _message(headers: list[tuple[str, str | bytes | None]], offset: int = 41) -> Message:
    return Message(
        topic="payments",
        partition=2,
        offset=offset,
        key=b"key-1",
        value=b'{"amount": 1}',
        headers=headers,
        timestamp=(1, 1_700_000_000_000),
    )


def _expected(name: str, raw: str, message: Message) -> str:
    return str(
        message_uuid(
            {name: raw},
            "payments",
            2,
            message.offset() or 0,
            (1_700_000_000_000, b"key-1", b'{"amount": 1}'),
        )
    )


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", ["message-id", "Idempotency-Key"])
def test_the_id_is_the_full_parsers_in_every_form(name: str, form: str) -> None:
    box = make_registry().get(INBOX_BOX)
    message = _message([(name, form.encode())])
    row = message_row(box, message)
    assert row["uuid"] == _expected(name.lower(), form, message)
    if form.lower() == str(SAMPLE) or form.lower() in (SAMPLE.hex, "{" + str(SAMPLE) + "}"):
        assert row["uuid"] == str(SAMPLE)


def test_message_id_wins_over_idempotency_key_even_when_only_the_key_is_canonical() -> None:
    box = make_registry().get(INBOX_BOX)
    message = _message([("idempotency-key", str(SAMPLE).encode()), ("message-id", b"order-7")])
    row = message_row(box, message)
    assert row["uuid"] == _expected("message-id", "order-7", message)
    assert row["uuid"] != str(SAMPLE)


def test_without_an_id_header_the_id_is_derived_from_place_and_content() -> None:
    box = make_registry().get(INBOX_BOX)
    first, moved = _message([], offset=1), _message([], offset=2)
    empty = _message([("message-id", b""), ("message-id", str(SAMPLE).encode())], offset=1)
    assert message_row(box, first)["uuid"] == str(
        message_uuid({}, "payments", 2, 1, (1_700_000_000_000, b"key-1", b'{"amount": 1}'))
    )
    assert message_row(box, moved)["uuid"] != message_row(box, first)["uuid"]
    # An empty id header names nothing; a repeated header keeps its first value.
    assert message_row(box, empty)["uuid"] == message_row(box, first)["uuid"]


def test_a_random_thousand_canonical_ids_in_mixed_case_match_the_parser() -> None:
    box = make_registry().get(INBOX_BOX)
    for n in range(1_000):
        text = str(uuid.uuid4())
        mixed = "".join(c.upper() if (n >> i) & 1 else c for i, c in enumerate(text))
        row = message_row(box, _message([("message-id", mixed.encode())], offset=n))
        assert row["uuid"] == str(uuid.UUID(mixed)) == text
