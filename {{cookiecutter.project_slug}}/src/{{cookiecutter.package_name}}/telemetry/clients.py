"""Client spans: one per SQL statement sent through SQLAlchemy, one per httpx request.

- Database: the SQLAlchemy instrumentation's engine tracer on each async engine's
  `sync_engine` (`db.create_engine` hands every engine here). asyncpg is not instrumented as
  well: that would make two spans of one statement. A statement makes a span only inside a
  trace (an HTTP request, an item's processing, an inbox handler): the worker's periodic
  statements (pauses, depth samples, locks) would otherwise start a root trace each, every
  few seconds, and bury the traces that matter. The relay's claim and record and the inbox
  consumer's insert run on asyncpg connections directly (`outbox_engine/store/pgconn.py`), outside
  SQLAlchemy, so they make no span at all: one statement covers a batch of hundreds of
  items, whose own spans (process, publish) already say what happened to each; a span per
  batch statement would add cost to the hot path and nothing to any item's trace.
- HTTP: the httpx instrumentation, process-wide: every request of an httpx client (the
  webhook transport's among them) is a CLIENT span that injects its `traceparent`.

Engines may be created before or after telemetry is configured; either order instruments
each engine once (twice would make two spans per statement).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
from opentelemetry.instrumentation.sqlalchemy.version import (
    __version__ as SQLALCHEMY_INSTRUMENTATION_VERSION,
)
from opentelemetry.metrics import get_meter
from opentelemetry.trace import Link, Span, SpanKind
from opentelemetry.util import types
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from opentelemetry.util._decorator import _AgnosticContextManager

DB_INSTRUMENTATION = "opentelemetry.instrumentation.sqlalchemy"


class ChildSpansOnly(trace.Tracer):
    """A tracer that makes a span only when one is current (or given as the parent);
    otherwise it returns the invalid, non-recording span, which costs nothing to end."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        if not trace.get_current_span(context).get_span_context().is_valid:
            return trace.INVALID_SPAN
        return self._tracer.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )

    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> _AgnosticContextManager[Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time)
        return trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        )


class _Statements:
    """Which engines are traced, and the tracer once telemetry is on."""

    def __init__(self) -> None:
        self.tracer: ChildSpansOnly | None = None
        self.waiting: weakref.WeakSet[AsyncEngine] = weakref.WeakSet()
        self.traced: weakref.WeakSet[AsyncEngine] = weakref.WeakSet()
        self.connections_usage: object = None

    def enable(self, provider: trace.TracerProvider) -> None:
        self.tracer = ChildSpansOnly(
            provider.get_tracer(DB_INSTRUMENTATION, SQLALCHEMY_INSTRUMENTATION_VERSION)
        )
        self.connections_usage = get_meter(DB_INSTRUMENTATION).create_up_down_counter(
            "db.client.connections.usage",
            unit="connections",
            description="Connections of the pool by state (idle, used)",
        )
        for engine in list(self.waiting):
            self.trace(engine)
        self.waiting.clear()

    def trace(self, engine: AsyncEngine) -> None:
        if self.tracer is None:
            self.waiting.add(engine)
        elif engine not in self.traced:
            self.traced.add(engine)
            EngineTracer(  # type: ignore[no-untyped-call]
                self.tracer, engine.sync_engine, self.connections_usage
            )


_STATEMENTS = _Statements()


def trace_statements(engine: AsyncEngine) -> None:
    """Give `engine` a span per statement: now if telemetry is on, else once it is turned
    on (never, when OTEL_SDK_DISABLED is set)."""
    _STATEMENTS.trace(engine)


def instrument_clients(provider: trace.TracerProvider) -> None:
    """Turn on database and HTTP client spans (once per process, from `configure`)."""
    _STATEMENTS.enable(provider)
    instrumentor = HTTPXClientInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=provider)
