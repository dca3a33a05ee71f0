"""The write guard: bulk UPDATE/DELETE statements on replicated tables emit no outbox
items, so they are refused unless wrapped in `unguarded_write()`.

Installed on an engine (the generated tests do it for every test, see tests/conftest.py);
the ORM's own per-row writes during a flush are allowed: those emit items.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy import Delete, Engine, TextClause, Update, event
from sqlalchemy.orm import ORMExecuteState, Session

from outbox_engine.sharding.replication import replicated_tables

_unguarded: ContextVar[bool] = ContextVar("unguarded_write", default=False)
FLUSHING = "outbox_flushing"
RAW_WRITE = re.compile(r"^\s*(?:UPDATE|DELETE\s+FROM)\s+(?:ONLY\s+)?\"?(\w+)\"?", re.IGNORECASE)


class UnguardedWriteError(RuntimeError):
    """A bulk write to a replicated table would bypass its outbox."""


@contextmanager
def unguarded_write() -> Iterator[None]:
    """Allow bulk writes to replicated tables (you emit their items yourself)."""
    token = _unguarded.set(True)
    try:
        yield
    finally:
        _unguarded.reset(token)


def _refuse(sql: str, table: str) -> None:
    raise UnguardedWriteError(
        f"bulk write to replicated table {table!r} emits no outbox items:\n    {sql.strip()}\n"
        "Fix: load and change the objects through the session (their items are emitted in the "
        "flush), or emit the items yourself with outbox.create_for() and wrap the statement "
        "in `with unguarded_write():`."
    )


def _check_orm(state: ORMExecuteState) -> None:
    if _unguarded.get() or not (state.is_update or state.is_delete):
        return
    statement = state.statement
    table = getattr(getattr(statement, "table", None), "name", None)
    if table in replicated_tables():
        _refuse(str(statement), table)


def _check_core(conn: Any, clause: Any, *_args: Any) -> None:
    if _unguarded.get() or conn.info.get(FLUSHING):
        return
    tables = replicated_tables()
    if isinstance(clause, Update | Delete):
        name = clause.table.name  # type: ignore[union-attr]
        if name in tables:
            _refuse(str(clause), name)
    elif isinstance(clause, TextClause):
        match = RAW_WRITE.match(clause.text)
        if match and match.group(1) in tables:
            _refuse(clause.text, match.group(1))


def _flush_begins(session: Session, *_args: Any) -> None:
    session.connection().info[FLUSHING] = True


def _flush_ends(session: Session, *_args: Any) -> None:
    if session.in_transaction():
        session.connection().info.pop(FLUSHING, None)


def _clear_flushing(conn: Any) -> None:
    # An invalidated connection (a statement cancelled by its task, a server gone away) has
    # no DBAPI connection, and reading `conn.info` would try to reconnect inside the failed
    # transaction (PendingRollbackError, which would hide the real error). Nothing to clear
    # there: the pool empties a connection's `info` when it replaces the invalidated one.
    if conn.invalidated or conn.closed:
        return
    conn.info.pop(FLUSHING, None)


def install_write_guard(engine: Engine) -> Callable[[], None]:
    """Refuse unguarded bulk writes to replicated tables on this engine; returns an uninstaller."""
    hooks: list[tuple[Any, str, Callable[..., Any]]] = [
        (Session, "do_orm_execute", _check_orm),
        (Session, "before_flush", _flush_begins),
        (Session, "after_flush_postexec", _flush_ends),
        (engine, "before_execute", _check_core),
        # A flush that failed half way must not leave the connection marked as flushing.
        (engine, "commit", _clear_flushing),
        (engine, "rollback", _clear_flushing),
    ]
    for target, name, fn in hooks:
        if not event.contains(target, name, fn):
            event.listen(target, name, fn)

    def uninstall() -> None:
        for target, name, fn in hooks:
            if event.contains(target, name, fn):
                event.remove(target, name, fn)

    return uninstall
