"""Item statuses, stored as small integers."""

from __future__ import annotations

import enum


class ItemStatus(enum.IntEnum):
    PENDING = 0
    FAILED = 1
    DELIVERED = 2
    DISCARDED = 3
    # Moved aside: failed for good, and no longer blocks its key (see `poisoned_head`).
    PARKED = 4
