"""outbox_engine: the transactional outbox/inbox engine of this service (the public API).

Import what your code needs from here (`from outbox_engine import Outbox, KafkaTransport`).
The names below are the engine's contract with the service: they keep their meaning across
template updates. Every module under this package is internal: it may be renamed or split
by a template update (`cruft update`), so import from the package, not from its modules.

The engine is the same file for file in every generated project, imports nothing of the
service, and is not edited by hand (your edits would conflict with the next update): change
behaviour through `config/boxes.yaml`, your transports, handlers and middlewares instead.
The layout is described in docs/architecture.md.
"""

from __future__ import annotations

from outbox_engine.config.boxes import ConfigError
from outbox_engine.contracts.events import Event, EventTypes, InvalidEvent
from outbox_engine.creation.items import Outbox
from outbox_engine.creation.shards import Category, Scope, ShardError, ShardRegistry
from outbox_engine.middleware import (
    BatchMiddleware,
    CreateCall,
    CreateMiddleware,
    CreateNext,
    ItemMiddleware,
    Middlewares,
    NewItem,
)
from outbox_engine.observability.observer import Observer
from outbox_engine.sharding.flush import Flusher
from outbox_engine.sharding.guard import UnguardedWriteError, unguarded_write
from outbox_engine.sharding.replication import replicated
from outbox_engine.store.models import InboxItemMixin, OutboxItemMixin
from outbox_engine.store.status import ItemStatus
from outbox_engine.testing import CreatedItem, capture_created, drain, feed
from outbox_engine.transports.base import (
    BaseTransport,
    EventHandler,
    InboxHandler,
    ItemRecord,
    PermanentFailure,
    PipelinedTransport,
    Transport,
    TransportUnavailable,
)
from outbox_engine.transports.builtin import HttpWebhookTransport, KafkaTransport, LogTransport
from outbox_engine.transports.resources import Resources

__all__ = [
    "BaseTransport",
    "BatchMiddleware",
    "Category",
    "ConfigError",
    "CreateCall",
    "CreateMiddleware",
    "CreateNext",
    "CreatedItem",
    "Event",
    "EventHandler",
    "EventTypes",
    "Flusher",
    "HttpWebhookTransport",
    "InboxHandler",
    "InboxItemMixin",
    "InvalidEvent",
    "ItemMiddleware",
    "ItemRecord",
    "ItemStatus",
    "KafkaTransport",
    "LogTransport",
    "Middlewares",
    "NewItem",
    "Observer",
    "Outbox",
    "OutboxItemMixin",
    "PermanentFailure",
    "PipelinedTransport",
    "Resources",
    "Scope",
    "ShardError",
    "ShardRegistry",
    "Transport",
    "TransportUnavailable",
    "UnguardedWriteError",
    "capture_created",
    "drain",
    "feed",
    "replicated",
    "unguarded_write",
]
