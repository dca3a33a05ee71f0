"""Column layout shared by every outbox and inbox item table.

A concrete item is `class OrderOutboxItem(OutboxItemMixin, Base)` with a `__tablename__`.
The partial index on pending rows by (bucket, id) turns the relay's claim into an index
range scan however many delivered rows the table holds.

The key index, (event_key, id), covers every row or only the open ones (pending or failed),
as the class's `delivered_key_index` says. Marking an item delivered changes `status`, which
the partial indexes read, so PostgreSQL writes the row's new version into every index whose
predicate it meets: an index of open rows takes no entry for it, 30-40% less of what a
delivered row costs PostgreSQL (docs/performance.md). Only two lookups
read delivered rows by key: `latest_available` and coalescing (store/items.py); on a table
without that index they give the same answers from a slower plan, and the worker says so.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    DateTime,
    Identity,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Text,
    TextClause,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from outbox_engine.store.status import ItemStatus

# The rows that hold back the later items of their key in a strict box: failed for good, or
# pending with a retry scheduled (the claim skips those whose retry is not yet due).
BLOCKING_ROWS = text(
    f"status = {int(ItemStatus.FAILED)} "
    f"OR (status = {int(ItemStatus.PENDING)} AND next_attempt_at IS NOT NULL)"
)


# The rows that still hold their key's place: waiting to go, or failed for good. Delivered,
# discarded and parked rows are closed.
OPEN_ROWS = text(f"status = {int(ItemStatus.PENDING)} OR status = {int(ItemStatus.FAILED)}")


def key_index_name(table: str, *, delivered: bool) -> str:
    """The (event_key, id) index: of every row (`delivered`) or of OPEN_ROWS only."""
    return f"ix_{table}_event_key_id" if delivered else f"ix_{table}_open_key_id"


def key_index_where(*, delivered: bool) -> TextClause | None:
    """The (event_key, id) index's predicate: none (every row) or OPEN_ROWS. The class's
    Index, the migrations' `create_item_table` and `switch_key_index` all take it here."""
    return None if delivered else OPEN_ROWS


def blocked_index_name(table: str) -> str:
    """The partial index of BLOCKING_ROWS by (event_key, id): the strict claim's check."""
    return f"ix_{table}_blocked"


class ItemMixin:
    """Columns common to outbox and inbox items."""

    box_kind: ClassVar[str]
    # Whether the (event_key, id) index also holds delivered rows (see the module's
    # docstring). True keeps the layout of tables made before the choice existed; boxes
    # made by `generate item` say False. Changing it needs a migration:
    # `outbox_engine.store.schema.switch_key_index`.
    delivered_key_index: ClassVar[bool] = True

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    uuid: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    event_name: Mapped[str] = mapped_column(String(255), nullable=False)
    event_key: Mapped[str] = mapped_column(String(255), nullable=False)
    bucket: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[int] = mapped_column(
        SmallInteger, nullable=False, server_default=text(str(int(ItemStatus.PENDING)))
    )
    payload: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    headers: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, server_default=text("'{}'::jsonb")
    )
    errors_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    @declared_attr.directive
    @classmethod
    def __table_args__(cls) -> tuple[Any, ...]:
        table = cls.__tablename__  # type: ignore[attr-defined]
        return (
            Index(f"ix_{table}_uuid", "uuid", unique=True),
            Index(
                f"ix_{table}_pending",
                "bucket",
                "id",
                postgresql_where=text(f"status = {int(ItemStatus.PENDING)}"),
            ),
            key_index(table, delivered=cls.delivered_key_index),
            Index(blocked_index_name(table), "event_key", "id", postgresql_where=BLOCKING_ROWS),
            Index(f"ix_{table}_created_at", "created_at", postgresql_using="brin"),
        )


def key_index(table: str, *, delivered: bool) -> Index:
    return Index(
        key_index_name(table, delivered=delivered),
        "event_key",
        "id",
        postgresql_where=key_index_where(delivered=delivered),
    )


class OutboxItemMixin(ItemMixin):
    box_kind: ClassVar[str] = "outbox"


class InboxItemMixin(ItemMixin):
    box_kind: ClassVar[str] = "inbox"

    source_topic: Mapped[str | None] = mapped_column(String(255), nullable=True)
    source_partition: Mapped[int | None] = mapped_column(Integer, nullable=True)
    source_offset: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
