"""How the claim reads an item's headers from their text (relay/claim.py): the fast path
gives what `json.loads` gives, and text it cannot read whole falls back to `json.loads`,
with the same value or the same error. (The stored-text cases, against PostgreSQL, are in
tests/integration/test_relay.py.)"""

from __future__ import annotations

import json

import pytest

from outbox_engine.relay.claim import _headers


@pytest.mark.parametrize(
    "text",
    [
        '{"hop": 0, "correlation-id": "c"}',
        ' {"hop": 1}',  # whitespace around the value: PostgreSQL never prints it, json does
        '{"hop": 2}\n',
        '{"n": 1180591620717411303424, "f": 1e400, "s": "\\u00e9\\ud83c\\udf89"}',
    ],
)
def test_the_value_is_what_json_loads_makes_of_the_text(text: str) -> None:
    assert _headers(text) == json.loads(text)


@pytest.mark.parametrize("text", ["null", "{}", None])
def test_no_headers_are_an_empty_dict(text: str | None) -> None:
    assert _headers(text) == {}


@pytest.mark.parametrize("text", ['{"a": 1}x', "", "{", '{"a": NaN'])
def test_text_that_is_not_json_raises_what_json_raises(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        _headers(text)
    assert str(got.value) == str(expected.value)
