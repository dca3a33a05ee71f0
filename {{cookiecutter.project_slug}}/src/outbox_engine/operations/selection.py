"""Which items an operator means: ids, statuses, key, event, creation time, id range.

`Selection.build` validates raw operator input (CLI options, query parameters) and names
each problem in an `OpsError`. A `Selection` is an `ItemFilter`: store/selection.py renders
its WHERE clause from fixed SQL fragments and bound parameters, so operator input never
becomes SQL text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from outbox_engine.operations.errors import OpsError
from outbox_engine.store.status import ItemStatus

MAX_TEXT = 255
# ASCII digits only: `str.isdigit()` also accepts "²" or "٣", which int() then refuses or reads
# as another number. 19 digits cover every bigint and keep int() away from huge strings.
DIGITS = re.compile(r"[0-9]{1,19}")
ID_RANGE = re.compile(r"^\s*([0-9]*)\s*:\s*([0-9]*)\s*$")
MAX_ID = 2**63 - 1
# How much of a refused value an error message shows (it may be megabytes, or a secret).
SHOWN = 40


def shown(value: object) -> str:
    """A refused value as an error message shows it: repr (so NUL and unpaired surrogates
    print as escapes), cut to a few dozen characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[: SHOWN - 5]}...{text[-1]}"


def parse_status(value: str | int) -> ItemStatus:
    """A status by name (`failed`) or number (`1`)."""
    text = str(value).strip().lower()
    if DIGITS.fullmatch(text) and int(text) in ItemStatus._value2member_map_:
        return ItemStatus(int(text))
    for status in ItemStatus:
        if status.name.lower() == text:
            return status
    names = ", ".join(s.name.lower() for s in ItemStatus)
    raise OpsError(f"unknown status {shown(value)}; use one of {names}")


def parse_id(value: str | int) -> int:
    text = str(value).strip()
    if not DIGITS.fullmatch(text) or not 0 < int(text) <= MAX_ID:
        raise OpsError(f"malformed item id {shown(value)}: ids are integers 1-{MAX_ID}")
    return int(text)


def parse_id_range(value: str) -> tuple[int | None, int | None]:
    """`A:B` (both inclusive), `A:` or `:B`."""
    match = ID_RANGE.match(value)
    if not match or not (match.group(1) or match.group(2)):
        raise OpsError(f"malformed id range {shown(value)}: use FIRST:LAST, FIRST: or :LAST")
    first = parse_id(match.group(1)) if match.group(1) else None
    last = parse_id(match.group(2)) if match.group(2) else None
    if first is not None and last is not None and first > last:
        raise OpsError(f"id range {shown(value)} is empty: {first} > {last}")
    return first, last


def parse_time(value: str, name: str = "time") -> datetime:
    """An ISO 8601 time; without an offset it is UTC. Returned in UTC."""
    return _to_utc(name, _read_time(name, value))


def _read_time(name: str, value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise OpsError(
            f"{name}: malformed time {shown(value)}: use ISO 8601, e.g. 2026-01-31T12:00:00+00:00"
        ) from None


def _to_utc(name: str, value: datetime) -> datetime:
    """In UTC (naive means UTC). A time whose UTC instant falls outside years 1-9999 (e.g.
    9999-12-31T23:00-05:00) is refused here, not by the driver in the middle of a query."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise OpsError(
            f"{name}: time out of range (in UTC it falls outside years 1-9999)"
        ) from None


def _time_range(
    since: str | datetime | None, until: str | datetime | None
) -> tuple[datetime | None, datetime | None]:
    raw = {
        name: _read_time(name, value) if isinstance(value, str) else value
        for name, value in (("since", since), ("until", until))
    }
    start, end = raw["since"], raw["until"]
    if start is not None and end is not None and (start.tzinfo is None) != (end.tzinfo is None):
        raise OpsError(
            "since and until: give both with a UTC offset or both without one "
            "(a time without an offset is UTC)"
        )
    return (
        None if start is None else _to_utc("since", start),
        None if end is None else _to_utc("until", end),
    )


def check_text(
    name: str, value: str | None, max_length: int = MAX_TEXT, *, allow_empty: bool = False
) -> str | None:
    """Operator text (a key, an event name, a reason): at most `max_length` characters and
    storable in PostgreSQL, which refuses NUL; unpaired surrogates (from undecodable bytes
    in a command line, or `\\ud800` in JSON) cannot even be encoded for it."""
    if value is None:
        return None
    if (not value and not allow_empty) or len(value) > max_length:
        low = 0 if allow_empty else 1
        raise OpsError(f"{name} must be {low}-{max_length} characters")
    if "\x00" in value:
        raise OpsError(f"{name} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise OpsError(f"{name} must be valid UTF-8 text (it has unpaired surrogates)") from None
    return value


@dataclass(frozen=True)
class Selection:
    ids: tuple[int, ...] = ()
    statuses: tuple[ItemStatus, ...] = ()
    event_key: str | None = None
    event_name: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    first_id: int | None = None
    last_id: int | None = None

    @classmethod
    def build(
        cls,
        *,
        ids: Iterable[str | int] = (),
        statuses: Iterable[str | int] = (),
        event_key: str | None = None,
        event_name: str | None = None,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        id_range: str | None = None,
    ) -> Selection:
        """Validate raw operator input; every problem is an `OpsError` that names it."""
        first, last = parse_id_range(id_range) if id_range else (None, None)
        start, end = _time_range(since, until)
        if start and end and start >= end:
            raise OpsError("--since must be before --until")
        return cls(
            ids=tuple(dict.fromkeys(parse_id(i) for i in ids)),
            statuses=tuple(dict.fromkeys(parse_status(s) for s in statuses)),
            event_key=check_text("key", event_key),
            event_name=check_text("event", event_name),
            since=start,
            until=end,
            first_id=first,
            last_id=last,
        )

    @property
    def narrowed(self) -> bool:
        """True when something besides the status narrows the selection."""
        return bool(
            self.ids
            or self.event_key is not None
            or self.event_name is not None
            or self.since
            or self.until
            or self.first_id is not None
            or self.last_id is not None
        )

    def with_statuses(self, statuses: Iterable[ItemStatus]) -> Selection:
        return dataclasses.replace(self, statuses=tuple(statuses))
