"""Which items an operator means: ids, statuses, key, event, creation time, id range.

`Selection.where()` renders a WHERE clause of fixed SQL fragments and bound parameters;
operator input never becomes SQL text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..messaging.status import ItemStatus
from .errors import OpsError

MAX_TEXT = 255
ID_RANGE = re.compile(r"^\s*(\d*)\s*:\s*(\d*)\s*$")
MAX_ID = 2**63 - 1


def parse_status(value: str | int) -> ItemStatus:
    """A status by name (`failed`) or number (`1`)."""
    text = str(value).strip().lower()
    if text.isdigit() and int(text) in ItemStatus._value2member_map_:
        return ItemStatus(int(text))
    for status in ItemStatus:
        if status.name.lower() == text:
            return status
    names = ", ".join(s.name.lower() for s in ItemStatus)
    raise OpsError(f"unknown status {value!r}; use one of {names}")


def parse_id(value: str | int) -> int:
    text = str(value).strip()
    if not text.isdigit() or not 0 < int(text) <= MAX_ID:
        raise OpsError(f"malformed item id {value!r}: ids are positive integers")
    return int(text)


def parse_id_range(value: str) -> tuple[int | None, int | None]:
    """`A:B` (both inclusive), `A:` or `:B`."""
    match = ID_RANGE.match(value)
    if not match or not (match.group(1) or match.group(2)):
        raise OpsError(f"malformed id range {value!r}: use FIRST:LAST, FIRST: or :LAST")
    first = parse_id(match.group(1)) if match.group(1) else None
    last = parse_id(match.group(2)) if match.group(2) else None
    if first is not None and last is not None and first > last:
        raise OpsError(f"id range {value!r} is empty: {first} > {last}")
    return first, last


def parse_time(value: str) -> datetime:
    """An ISO 8601 time; without an offset it is UTC."""
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise OpsError(
            f"malformed time {value!r}: use ISO 8601, e.g. 2026-01-31T12:00:00+00:00"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_text(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not value or len(value) > MAX_TEXT or "\x00" in value:
        raise OpsError(f"{name} must be 1-{MAX_TEXT} characters without NUL")
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
        start = parse_time(since) if isinstance(since, str) else since
        end = parse_time(until) if isinstance(until, str) else until
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

    def where(self, alias: str = "") -> tuple[str, dict[str, Any]]:
        p = f"{alias}." if alias else ""
        clauses: list[str] = []
        params: dict[str, Any] = {}
        if self.ids:
            clauses.append(f"{p}id = ANY(CAST(:ids AS bigint[]))")
            params["ids"] = list(self.ids)
        if self.statuses:
            clauses.append(f"{p}status = ANY(CAST(:statuses AS smallint[]))")
            params["statuses"] = [int(s) for s in self.statuses]
        if self.event_key is not None:
            clauses.append(f"{p}event_key = :event_key")
            params["event_key"] = self.event_key
        if self.event_name is not None:
            clauses.append(f"{p}event_name = :event_name")
            params["event_name"] = self.event_name
        if self.since is not None:
            clauses.append(f"{p}created_at >= :since")
            params["since"] = self.since
        if self.until is not None:
            clauses.append(f"{p}created_at < :until")
            params["until"] = self.until
        if self.first_id is not None:
            clauses.append(f"{p}id >= :first_id")
            params["first_id"] = self.first_id
        if self.last_id is not None:
            clauses.append(f"{p}id <= :last_id")
            params["last_id"] = self.last_id
        return (" AND ".join(clauses) or "TRUE"), params
