"""Message-id clashes: a message whose id is already stored with a different payload.

The inbox stores each message id once (`ON CONFLICT (uuid) DO NOTHING`), which is what makes
redeliveries harmless. But the same id on a *different* message (a producer that reuses ids,
two producers that pick the same idempotency key) must not vanish as a "duplicate": the
batch's insert compares the payload of every row it did not store with the stored one
(store/inbox.py), in the same statement. A row whose stored twin that statement cannot see
(stored by a transaction that committed after it began: another consumer of the group, in
a rebalance) is compared by `ClashCheck.find` afterwards, by SHA-256 computed on both
sides. A clash is stored as its own row
under an id derived from the clashing one and its position in Kafka (so reading it again
does not store it twice), marked rejected: it fails in processing with the reason, shows in
`stats` and the admin API, and is logged. Its handler never runs on it.

Only rows both stored and received as they are take part: a row the consumer reduced to a
rejected one (oversized, unstorable) carries no payload to compare.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from outbox_engine.store.inbox import InboxStatements

CLASH_NAMESPACE = uuid.UUID("0b9f5a52-7f0c-4d39-8d8a-2f1c3c8e6a40")


def clash_id(message_id: uuid.UUID | str, topic: str, partition: int, offset: int) -> uuid.UUID:
    """The id a clash is stored under (`message_id` as a UUID or its canonical text: the
    name is built from its text, the same for both)."""
    return uuid.uuid5(CLASH_NAMESPACE, f"{message_id}/{topic}/{partition}/{offset}")


class ClashCheck:
    def __init__(self, statements: InboxStatements, rejected_header: str) -> None:
        self._statements = statements
        self._rejected = rejected_header

    async def find(self, conn: Any, rows: list[dict[str, Any]], seconds: float) -> list[int]:
        """Indexes into `rows` of the clashing ones (`conn`: an asyncpg connection)."""
        candidates = [i for i, row in enumerate(rows) if self._rejected not in row["headers"]]
        if not candidates:
            return []
        found = await self._statements.find_clashes(
            conn,
            [rows[i]["uuid"] for i in candidates],
            [hashlib.sha256(rows[i]["payload"]).digest() for i in candidates],
            seconds,
        )
        return sorted(candidates[i - 1] for i in found)

    def clash_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row that stores a clashing message: its own id, its content kept for the
        operator, rejected with the reason (no payload values in the reason)."""
        reason = (
            f"message id {row['uuid']} is already stored with a different payload; this "
            f"message ({row['source_topic']}/{row['source_partition']}@{row['source_offset']}) "
            "was not applied"
        )
        return {
            **row,
            "uuid": str(
                clash_id(
                    row["uuid"], row["source_topic"], row["source_partition"], row["source_offset"]
                )
            ),
            "headers": {
                **row["headers"],
                self._rejected: reason,
                "clashed-message-id": str(row["uuid"]),
            },
        }
