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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from outbox_engine.config.boxes import ConfigError
    from outbox_engine.contracts.events import Event, EventTypes, InvalidEvent
    from outbox_engine.creation.ids import new_message_id
    from outbox_engine.creation.items import Outbox
    from outbox_engine.creation.shards import Category, Scope, ShardError, ShardRegistry
    from outbox_engine.gc_tuning import tune_gc
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
    from outbox_engine.store.pool_ping import ping_on_checkout
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
    "new_message_id",
    "ping_on_checkout",
    "replicated",
    "tune_gc",
    "unguarded_write",
]

# Where each public name lives. Loaded on first use (PEP 562), so that importing one engine
# module, or the package for one name, does not import the whole engine (Kafka client,
# HTTP client, ...): a CLI command or a test process starts in the time it needs.
_SOURCES = {
    "BaseTransport": "outbox_engine.transports.base",
    "BatchMiddleware": "outbox_engine.middleware",
    "Category": "outbox_engine.creation.shards",
    "ConfigError": "outbox_engine.config.boxes",
    "CreateCall": "outbox_engine.middleware",
    "CreateMiddleware": "outbox_engine.middleware",
    "CreateNext": "outbox_engine.middleware",
    "CreatedItem": "outbox_engine.testing",
    "Event": "outbox_engine.contracts.events",
    "EventHandler": "outbox_engine.transports.base",
    "EventTypes": "outbox_engine.contracts.events",
    "Flusher": "outbox_engine.sharding.flush",
    "HttpWebhookTransport": "outbox_engine.transports.builtin",
    "InboxHandler": "outbox_engine.transports.base",
    "InboxItemMixin": "outbox_engine.store.models",
    "InvalidEvent": "outbox_engine.contracts.events",
    "ItemMiddleware": "outbox_engine.middleware",
    "ItemRecord": "outbox_engine.transports.base",
    "ItemStatus": "outbox_engine.store.status",
    "KafkaTransport": "outbox_engine.transports.builtin",
    "LogTransport": "outbox_engine.transports.builtin",
    "Middlewares": "outbox_engine.middleware",
    "NewItem": "outbox_engine.middleware",
    "Observer": "outbox_engine.observability.observer",
    "Outbox": "outbox_engine.creation.items",
    "OutboxItemMixin": "outbox_engine.store.models",
    "PermanentFailure": "outbox_engine.transports.base",
    "PipelinedTransport": "outbox_engine.transports.base",
    "Resources": "outbox_engine.transports.resources",
    "Scope": "outbox_engine.creation.shards",
    "ShardError": "outbox_engine.creation.shards",
    "ShardRegistry": "outbox_engine.creation.shards",
    "Transport": "outbox_engine.transports.base",
    "TransportUnavailable": "outbox_engine.transports.base",
    "UnguardedWriteError": "outbox_engine.sharding.guard",
    "capture_created": "outbox_engine.testing",
    "drain": "outbox_engine.testing",
    "feed": "outbox_engine.testing",
    "new_message_id": "outbox_engine.creation.ids",
    "ping_on_checkout": "outbox_engine.store.pool_ping",
    "replicated": "outbox_engine.sharding.replication",
    "tune_gc": "outbox_engine.gc_tuning",
    "unguarded_write": "outbox_engine.sharding.guard",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'outbox_engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
