"""Shared resources handed to transports at setup (one of each per process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from outbox_engine.observability.observer import Observer
from outbox_engine.transports.kafka import KafkaProducer

if TYPE_CHECKING:
    from outbox_engine.creation.items import Outbox


@dataclass(frozen=True)
class Resources:
    engine: AsyncEngine
    session_factory: async_sessionmaker[AsyncSession]
    producer: KafkaProducer
    http: httpx.AsyncClient
    outbox: Outbox
    observer: Observer = field(default_factory=Observer)
