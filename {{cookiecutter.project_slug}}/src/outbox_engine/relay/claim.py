"""The claim step: which pending items of the owned buckets this batch relays.

`Claimer.claim` reads up to `batch_size` pending, due items of the owned buckets (store/
items.py) on a kept driver connection, each bucket in id order. Starting every claim at the
next bucket keeps a deep bucket from starving the ones after it; a per-bucket cap keeps one
bucket from filling the batch. `left_more` says whether a claim may have left claimable items
behind (it reached `batch_size`, or some bucket's cap): only then does the lane claim again
at once (relay/lanes.py). `Claimer.claim_ids` is the synchronous flush's claim of named
items. Rows become `ItemRecord`s by a reader chosen once for the box's kind (an inbox row
also carries its Kafka source), so no step after this one asks the box's kind.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Collection, Sequence
from typing import Any, cast
from uuid import UUID

from outbox_engine.config.registry import Box
from outbox_engine.creation.shards import OBJECT_HEADER
from outbox_engine.store.items import ItemReads
from outbox_engine.store.pgconn import DriverConnections
from outbox_engine.transports.base import ItemRecord

Claimed = list[tuple[ItemRecord, bytes]]


class Claimer:
    def __init__(self, box: Box, connections: DriverConnections) -> None:
        self.box = box
        self.connections = connections
        inbox = box.kind == "inbox"
        self.reads = ItemReads(
            box.table_name,
            inbox=inbox,
            strict_order=box.config.strict_order,
            object_header=OBJECT_HEADER,
            delivered_key_index=box.item_class.delivered_key_index,
        )
        self._limit = box.config.batch_size
        self._rotation = 0
        # The last claim stopped at a limit: claimable items may be left (see claim()).
        self.left_more = False
        self._to_record: Callable[[Any], ItemRecord] = (
            self._inbox_record if inbox else self._outbox_record
        )

    async def claim(self, buckets: Sequence[int], paused_keys: Collection[str] = ()) -> Claimed:
        limit = self._limit
        per_bucket = bucket_share(limit, len(buckets))
        # The nested loop stops at `limit`: start each claim at the next bucket, so that a
        # deep bucket cannot starve the ones after it.
        self._rotation = (self._rotation + 1) % max(len(buckets), 1)
        order = [*buckets[self._rotation :], *buckets[: self._rotation]]
        async with self.connections.acquire() as conn:
            rows = await self.reads.claim(conn, order, per_bucket, limit, list(paused_keys))
        # Each key's items in id order whatever plan the database chose.
        rows.sort(key=_BUCKET_AND_ID)
        # Below both limits the claim took every claimable item of these buckets as of its
        # snapshot; what commits later sends a NOTIFY, which wakes the lane.
        self.left_more = len(rows) >= limit or (
            len(rows) >= per_bucket and _fullest_bucket(rows) >= per_bucket
        )
        to_record = self._to_record
        return [(to_record(row), row[5]) for row in rows]

    async def claim_ids(
        self, message_ids: Sequence[UUID], paused_keys: Collection[str] = ()
    ) -> Claimed:
        async with self.connections.acquire() as conn:
            rows = await self.reads.claim_ids(conn, list(message_ids), list(paused_keys))
        to_record = self._to_record
        return [(to_record(row), row[5]) for row in rows]

    def _outbox_record(self, row: Any) -> ItemRecord:
        """An ItemRecord of a claimed row (columns by position, see store/items.py)."""
        return ItemRecord(
            row[0], row[1], self.box.name, row[2], row[3], row[4], _headers(row[6]), row[7], row[8]
        )

    def _inbox_record(self, row: Any) -> ItemRecord:
        return ItemRecord(
            row[0],
            row[1],
            self.box.name,
            row[2],
            row[3],
            row[4],
            _headers(row[6]),
            row[7],
            row[8],
            source_topic=row[9],
            source_partition=row[10],
            source_offset=row[11],
        )


def bucket_share(limit: int, buckets: int) -> int:
    """The most items a claim of `limit` over `buckets` buckets takes of one bucket: four
    times an even share, at least 8, at most `limit`."""
    return min(limit, max(8, math.ceil(limit / max(buckets, 1)) * 4))


# A claimed row's (bucket, id), the order items go in (columns by position, store/items.py).
_BUCKET_AND_ID = operator.itemgetter(4, 0)


def _fullest_bucket(rows: Sequence[Any]) -> int:
    """The most rows of one bucket among `rows` (sorted by bucket)."""
    fullest = run = 0
    previous = None
    for row in rows:
        bucket = row[4]
        run = run + 1 if bucket == previous else 1
        previous = bucket
        fullest = max(fullest, run)
    return fullest


def _headers(value: Any) -> dict[str, Any]:
    """An item's headers from the claim's `headers::text`. PostgreSQL prints jsonb with
    nothing around the value, so the json module's C scanner reads it straight (0.6 us for
    a usual item's headers, against 1.3 us through the connection's jsonb codec and
    `json.loads`); text it does not read whole goes through `json.loads`, which gives the
    same value or its error. SQL null, JSON null or an empty object: {}."""
    if isinstance(value, str):
        try:
            parsed, end = _scan(value, 0)
        except StopIteration:
            end = -1
        if end != len(value):
            parsed = json.loads(value)
        value = parsed
    return value or {}


# The C scanner a default JSONDecoder parses with (what `json.loads` ends in); set on the
# instance by its __init__, which the type stubs do not declare.
_scan = cast(Callable[[str, int], tuple[Any, int]], vars(json.JSONDecoder())["scan_once"])
