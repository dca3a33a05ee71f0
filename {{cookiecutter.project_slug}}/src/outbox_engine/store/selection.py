"""The WHERE clause of an operator's selection of items: fixed SQL fragments and bound
parameters, so operator input never becomes SQL text.

`ItemFilter` is what a selection offers (operations/selection.py's `Selection` is one);
`where_clause` renders it. Every operator statement (store/actions.py, store/browse.py)
narrows its table with it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from outbox_engine.store.status import ItemStatus


class ItemFilter(Protocol):
    """Which items: every field left empty (None, ()) does not narrow."""

    @property
    def ids(self) -> tuple[int, ...]: ...
    @property
    def statuses(self) -> tuple[ItemStatus, ...]: ...
    @property
    def event_key(self) -> str | None: ...
    @property
    def event_name(self) -> str | None: ...
    @property
    def since(self) -> datetime | None: ...
    @property
    def until(self) -> datetime | None: ...
    @property
    def first_id(self) -> int | None: ...
    @property
    def last_id(self) -> int | None: ...


def where_clause(selection: ItemFilter, alias: str = "") -> tuple[str, dict[str, Any]]:
    """The condition (`TRUE` when nothing narrows) and its parameters; `alias` prefixes the
    columns (`t` gives `t.id`)."""
    p = f"{alias}." if alias else ""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if selection.ids:
        clauses.append(f"{p}id = ANY(CAST(:ids AS bigint[]))")
        params["ids"] = list(selection.ids)
    if selection.statuses:
        clauses.append(f"{p}status = ANY(CAST(:statuses AS smallint[]))")
        params["statuses"] = [int(s) for s in selection.statuses]
    if selection.event_key is not None:
        clauses.append(f"{p}event_key = :event_key")
        params["event_key"] = selection.event_key
    if selection.event_name is not None:
        clauses.append(f"{p}event_name = :event_name")
        params["event_name"] = selection.event_name
    if selection.since is not None:
        clauses.append(f"{p}created_at >= :since")
        params["since"] = selection.since
    if selection.until is not None:
        clauses.append(f"{p}created_at < :until")
        params["until"] = selection.until
    if selection.first_id is not None:
        clauses.append(f"{p}id >= :first_id")
        params["first_id"] = selection.first_id
    if selection.last_id is not None:
        clauses.append(f"{p}id <= :last_id")
        params["last_id"] = selection.last_id
    return (" AND ".join(clauses) or "TRUE"), params
