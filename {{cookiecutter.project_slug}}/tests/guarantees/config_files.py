"""The boxes file a scenario's processes read: the test boxes with strict order, short
backoffs and many retries (a fault must delay items, not fail them), the scenario's own
topics and box settings, and the inbox handled by `EffectHandler` (one effect row per
message, to count what was applied)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ..support import INBOX_BOX, OUTBOX_BOX, boxes_yaml, transport
from .transports import EffectHandler

if TYPE_CHECKING:
    from .scenarios import Scenario


def boxes_file(path: Path, scenario: Scenario, topic: str) -> Path:
    raw = copy.deepcopy(boxes_yaml())
    outbox = raw["outbox"][OUTBOX_BOX]
    outbox.update(
        {
            # Ordered: every scenario must keep each key's first deliveries in creation order.
            "strict_order": True,
            "retry_strategies": ["exponential_backoff"],
            "backoff": {"min_seconds": 0.5, "max_seconds": 5, "multiplier": 2, "jitter": 0.2},
            "max_retries": 200,
            "poll_interval": 0.2,
        }
    )
    outbox.update(copy.deepcopy(scenario.outbox))
    for configured in outbox["transports"]:
        configured.setdefault("args", {})["topic"] = topic
    inbox = raw["inbox"][INBOX_BOX]
    inbox.update(
        {
            "topics": [f"{topic}-in"],
            "group_id": f"{topic}-group",
            "transports": [transport(EffectHandler)],
            "backoff": {"min_seconds": 0.5, "max_seconds": 5, "multiplier": 2, "jitter": 0.2},
            "max_retries": 200,
            "poll_interval": 0.2,
            "session_timeout_ms": 6000,
        }
    )
    inbox.update(copy.deepcopy(scenario.inbox))
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path
