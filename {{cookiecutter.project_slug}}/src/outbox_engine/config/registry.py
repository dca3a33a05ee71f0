"""The box registry: the validated configuration resolved into classes and transports.

A box's event models are the `event_types` its item class declares (see events.py); an
`EventHandler` bound to an event must take the model the box declares for it, else the
configuration is refused at start (a handler would parse what producers do not send)."""

from __future__ import annotations

import importlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import Table

from outbox_engine.config.boxes import BoxConfig, BoxesConfig, ConfigError, InboxBoxConfig
from outbox_engine.config.partitioning import bucket_for
from outbox_engine.contracts.events import NO_EVENTS, EventTypes
from outbox_engine.store.models import InboxItemMixin, ItemMixin, OutboxItemMixin
from outbox_engine.transports.base import BaseTransport, EventHandler, InboxHandler, Transport


def import_object(path: str, where: str) -> Any:
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import module {module_name!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{where}: module {module_name!r} has no attribute {attr!r}") from None


@dataclass(frozen=True)
class BoundTransport:
    event_name: str | None
    transport: BaseTransport

    def matches(self, event_name: str) -> bool:
        return self.event_name is None or self.event_name == event_name


@dataclass
class Box:
    name: str
    kind: Literal["outbox", "inbox"]
    config: BoxConfig
    item_class: type[ItemMixin]
    transports: list[BoundTransport] = field(default_factory=list)
    event_types: EventTypes = NO_EVENTS
    # event name -> its transports; keyed with the binding count so late additions show.
    _matching: dict[str, tuple[int, list[BaseTransport]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def table(self) -> Table:
        table = self.item_class.__table__  # type: ignore[attr-defined]
        assert isinstance(table, Table)
        return table

    @property
    def table_name(self) -> str:
        return self.table.name

    @property
    def lock_namespace(self) -> int:
        """First key of this box's advisory locks: stable, non-negative 31-bit."""
        return zlib.crc32(f"outbox-box:{self.name}".encode()) & 0x7FFFFFFF

    @property
    def channel(self) -> str:
        """The NOTIFY channel that wakes workers for this box."""
        return f"box_{self.name}"

    @property
    def relayed_by_debezium(self) -> bool:
        return getattr(self.config, "relay", "worker") == "debezium"

    @property
    def inbox_config(self) -> InboxBoxConfig:
        assert isinstance(self.config, InboxBoxConfig)
        return self.config

    def bucket_for(self, key: str) -> int:
        return bucket_for(key, self.config.partition_strategy, self.config.bucket_count)

    def transports_for(self, event_name: str) -> list[BaseTransport]:
        """The transports of an event, in configuration order (looked up once per name)."""
        cached = self._matching.get(event_name)
        if cached is not None and cached[0] == len(self.transports):
            return cached[1]
        found = [bound.transport for bound in self.transports if bound.matches(event_name)]
        self._matching[event_name] = (len(self.transports), found)
        return found


class BoxRegistry:
    def __init__(self, config: BoxesConfig) -> None:
        self.config = config
        self._boxes: dict[str, Box] = {}
        self._by_class: dict[type[Any], Box] = {}
        sections: tuple[tuple[str, dict[str, Any], type[ItemMixin], type[BaseTransport]], ...] = (
            ("outbox", dict(config.outbox), OutboxItemMixin, Transport),
            ("inbox", dict(config.inbox), InboxItemMixin, InboxHandler),
        )
        for kind, section, base, transport_base in sections:
            for name, box_config in section.items():
                where = f"{kind}.{name}"
                item_class = import_object(box_config.item_class, f"{where}.item_class")
                if not (isinstance(item_class, type) and issubclass(item_class, base)):
                    raise ConfigError(
                        f"{where}.item_class: {box_config.item_class} must be a mapped subclass "
                        f"of {base.__name__}"
                    )
                if item_class in self._by_class:
                    raise ConfigError(
                        f"{where}.item_class: already used by box {self._by_class[item_class].name}"
                    )
                event_types = getattr(item_class, "event_types", NO_EVENTS)
                if not isinstance(event_types, EventTypes):
                    raise ConfigError(
                        f"{where}.item_class: {box_config.item_class}.event_types must be an "
                        "EventTypes(...)"
                    )
                box = Box(
                    name=name,
                    kind=kind,  # type: ignore[arg-type]
                    config=box_config,
                    item_class=item_class,
                    event_types=event_types,
                )
                for index, transport_config in enumerate(box_config.transports):
                    t_where = f"{where}.transports[{index}]"
                    cls = import_object(transport_config.class_path, f"{t_where}.class")
                    if not (isinstance(cls, type) and issubclass(cls, transport_base)):
                        raise ConfigError(
                            f"{t_where}.class: {transport_config.class_path} is not a "
                            f"{transport_base.__name__} ({kind} boxes need one)"
                        )
                    try:
                        transport = cls(**transport_config.args)
                    except (TypeError, ValueError) as exc:
                        raise ConfigError(f"{t_where}.args: {exc}") from None
                    _check_handler_model(box, transport_config.event_name, transport, t_where)
                    box.transports.append(BoundTransport(transport_config.event_name, transport))
                if getattr(box_config, "relay", "worker") == "debezium":
                    from outbox_engine.debezium.connector import debezium_topic

                    debezium_topic(box)
                self._boxes[name] = box
                self._by_class[item_class] = box

    def __iter__(self) -> Any:
        return iter(self._boxes.values())

    def names(self) -> list[str]:
        return list(self._boxes)

    def get(self, name: str) -> Box:
        try:
            return self._boxes[name]
        except KeyError:
            raise ConfigError(
                f"unknown box {name!r}; configured boxes: {', '.join(self._boxes) or 'none'}"
            ) from None

    def for_item_class(self, item_class: type[Any]) -> Box:
        try:
            return self._by_class[item_class]
        except KeyError:
            raise ConfigError(
                f"{item_class.__name__} is not configured as a box in the boxes file"
            ) from None

    def select(self, names: list[str] | None, kind: str | None = None) -> list[Box]:
        boxes = [self.get(n) for n in names] if names else list(self._boxes.values())
        return [b for b in boxes if kind is None or b.kind == kind]

    def transports(self) -> list[BaseTransport]:
        return [bound.transport for box in self._boxes.values() for bound in box.transports]


def _check_handler_model(
    box: Box, event_name: str | None, transport: BaseTransport, where: str
) -> None:
    if not isinstance(transport, EventHandler):
        return
    if not isinstance(getattr(transport, "model", None), type):
        raise ConfigError(
            f"{where}.class: {type(transport).__name__} names no event model; declare it as "
            "EventHandler[Model] or `model = Model`"
        )
    if event_name is None:
        raise ConfigError(
            f"{where}.event_name: {type(transport).__name__} parses {transport.model.__name__}; "
            "bind it to the one event it takes (event_name: ...)"
        )
    declared = box.event_types.model_for(event_name)
    if declared is not None and declared is not transport.model:
        raise ConfigError(
            f"{where}.class: {type(transport).__name__} takes {transport.model.__name__}, but "
            f"{box.item_class.__name__}.event_types declares {declared.__name__} for {event_name}"
        )
