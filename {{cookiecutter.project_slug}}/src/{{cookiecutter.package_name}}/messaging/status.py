"""Item statuses, stored as small integers."""

from __future__ import annotations

import enum


class ItemStatus(enum.IntEnum):
    PENDING = 0
    FAILED = 1
    DELIVERED = 2
    DISCARDED = 3
