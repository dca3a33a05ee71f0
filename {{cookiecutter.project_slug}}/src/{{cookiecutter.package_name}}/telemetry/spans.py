"""The engine's spans: its tracer, the `create` span (its context stored in the items' headers),
the `process` and `publish` spans, and how a failure is recorded on them (the same text as
`last_error`, never `str(error)`, which can hold payload values)."""

from __future__ import annotations

from types import TracebackType
from uuid import UUID

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from outbox_engine.middleware import CreateCall, CreateNext
from outbox_engine.observability.observer import ProcessScope, PublishSpan
from outbox_engine.relay.failures import failure_text

INSTRUMENTATION = "outbox_engine"

_tracers: dict[int, trace.Tracer] = {}


def tracer() -> trace.Tracer:
    """The engine's tracer, looked up once per tracer provider (the lookup is not cheap)."""
    provider = trace.get_tracer_provider()
    tracer = _tracers.get(id(provider))
    if tracer is None:
        tracer = _tracers[id(provider)] = trace.get_tracer(INSTRUMENTATION)
    return tracer


def inject(span: Span) -> dict[str, str]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def finish(span: Span, error: BaseException | None) -> None:
    if error is not None:
        # Not span.record_exception: its message and stack trace carry str(error), which for
        # a database error holds the statement's parameters (payload values). The same text
        # as last_error instead (outbox_engine/relay/failures.py).
        text = failure_text(error)
        span.add_event(
            "exception",
            {"exception.type": type(error).__qualname__, "exception.message": text},
        )
        span.set_status(Status(StatusCode.ERROR, text[:200]))
    span.end()


class TracingCreateMiddleware:
    """A span per create/create_batch; its context travels in the items' headers."""

    async def __call__(self, call: CreateCall, call_next: CreateNext) -> list[UUID]:
        attributes: dict[str, str | int] = {
            "messaging.system": "outbox",
            "messaging.operation.type": "create",
            "messaging.destination.name": call.box.name,
            "messaging.batch.message_count": len(call.items),
        }
        with tracer().start_as_current_span(
            f"{call.box.name} create", kind=SpanKind.PRODUCER, attributes=attributes
        ) as span:
            carrier = inject(span)
            for item in call.items:
                item.headers.update(carrier)
            return await call_next(call)


class Scope(ProcessScope):
    def __init__(self, span: Span) -> None:
        self.span = span
        self.headers = inject(span)
        self._token: object | None = None

    def __enter__(self) -> Scope:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._token = None

    def end(self, error: BaseException | None = None) -> None:
        finish(self.span, error)


class Publish(PublishSpan):
    def __init__(self, span: Span) -> None:
        self.span = span

    def headers(self) -> dict[str, str]:
        return inject(self.span)

    def end(self, error: BaseException | None = None) -> None:
        finish(self.span, error)
