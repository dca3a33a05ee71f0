"""One trace end to end (database statements and webhooks included), and metrics that count
exactly (generated with OpenTelemetry)."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator

import asyncpg  # type: ignore[import-untyped]
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from sqlalchemy import func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from {{ cookiecutter.package_name }}.container import Container
from {{ cookiecutter.package_name }}.telemetry import render_metrics
from {{ cookiecutter.package_name }}.telemetry.clients import DB_INSTRUMENTATION
from outbox_engine.store.status import ItemStatus
from outbox_engine.transports.base import InboxHandler, ItemRecord
from outbox_engine.transports.builtin import HttpWebhookTransport

from ..support import (
    INBOX_BOX,
    OUTBOX_BOX,
    InboxItem,
    OutboxItem,
    RecordingHandler,
    make_registry,
    running_worker,
    transport,
    wait_for,
)
from .test_builtin_transports import values, webhook_server
from .test_inbox import running_consumer


@pytest.fixture
def spans(container: Container) -> Iterator[InMemorySpanExporter]:
    container.observer()  # installs the tracer provider
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "telemetry did not install the SDK tracer provider"
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.clear()


async def count(
    container: Container, model: type[OutboxItem] | type[InboxItem], status: ItemStatus
) -> int:
    query = select(func.count()).select_from(model).where(model.status == int(status))
    async with container.session_factory()() as session:
        return int((await session.execute(query)).scalar_one())


async def _at_least(
    container: Container, model: type[OutboxItem] | type[InboxItem], expected: int
) -> bool:
    return await count(container, model, ItemStatus.DELIVERED) >= expected


def by_name(finished: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    matches = [s for s in finished if s.name == name]
    assert len(matches) == 1, (
        f"{len(matches)} spans named {name!r} among {[s.name for s in finished]}"
    )
    return matches[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def scope_of(span: ReadableSpan) -> str:
    return span.instrumentation_scope.name if span.instrumentation_scope else ""


def query_text(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    return str(attributes.get("db.query.text") or attributes.get("db.statement") or "")


async def test_statements_are_one_span_each_and_only_inside_a_trace(
    container: Container, spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("test")
    async with container.session_factory()() as session:
        await session.execute(text("SELECT 41"))  # no trace current: no span
        with tracer.start_as_current_span("GET /things", kind=trace.SpanKind.SERVER) as request:
            for n in range(3):
                assert (await session.execute(text(f"SELECT {n} + 1"))).scalar_one() == n + 1
        await session.execute(text("SELECT 42"))
        await session.commit()
    statements = [s for s in spans.get_finished_spans() if scope_of(s) == DB_INSTRUMENTATION]
    # One span per statement (not one from SQLAlchemy and one from the driver), all children
    # of the span current when they ran; the statements outside it made none.
    assert len(statements) == 3, [s.name for s in statements]
    parent = request.get_span_context()
    assert {s.context.trace_id for s in statements} == {parent.trace_id}
    assert {parent_of(s) for s in statements} == {parent.span_id}
    assert {s.kind for s in statements} == {trace.SpanKind.CLIENT}
    texts = sorted(query_text(s) for s in statements)
    assert texts == ["SELECT 0 + 1", "SELECT 1 + 1", "SELECT 2 + 1"]
    for span in statements:
        assert span.attributes is not None
        system = span.attributes.get("db.system.name") or span.attributes.get("db.system")
        assert system == "postgresql"


async def test_a_webhook_continues_the_items_trace(
    container: Container, spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("test")
    async with webhook_server({}) as (port, _, heads):
        hook = transport(
            HttpWebhookTransport,
            url=f"http://127.0.0.1:{port}/hook",
            headers={"Content-Type": "application/cloudevents+json"},
        )
        registry = make_registry(outbox={"transports": [hook]})
        with tracer.start_as_current_span("POST /things", kind=trace.SpanKind.SERVER) as request:
            async with container.session_factory()() as session, session.begin():
                await container.outbox().create(
                    session, OutboxItem, event_key="1", event_name="hooked", payload={}
                )
        async with running_worker(container, registry):
            await wait_for(lambda: _at_least(container, OutboxItem, 1), within=20)
        await asyncio.sleep(0.2)
    assert len(heads) == 1
    lines = heads[0]
    assert values(lines, "content-type") == ["application/cloudevents+json"]
    (traceparent,) = values(lines, "traceparent")
    version, trace_id, parent_id, flags = traceparent.split("-")
    assert version == "00"
    assert int(flags, 16) & 1  # sampled
    # The receiver continues the trace of the request that created the item...
    assert int(trace_id, 16) == request.get_span_context().trace_id
    finished = spans.get_finished_spans()
    process = by_name(finished, f"{OUTBOX_BOX} process")
    clients = [
        s for s in finished if s.kind == trace.SpanKind.CLIENT and scope_of(s).endswith(".httpx")
    ]
    assert len(clients) == 1, [(s.name, scope_of(s)) for s in finished]
    # ...as a child of the HTTP client span, itself a child of the item's process span.
    assert int(parent_id, 16) == clients[0].context.span_id
    assert parent_of(clients[0]) == process.context.span_id
    attributes = clients[0].attributes
    assert attributes is not None
    status = attributes.get("http.response.status_code") or attributes.get("http.status_code")
    assert status == 200


async def test_one_trace_from_request_to_inbox_handler(
    container: Container, env_topics: str, spans: InMemorySpanExporter
) -> None:
    handler = transport(RecordingHandler, name="trace", emit=False)
    registry = make_registry(inbox={"topics": [env_topics], "transports": [handler]})
{%- if cookiecutter.include_example_domain %}
    import httpx

    from {{ cookiecutter.package_name }}.api.app import create_app

    asgi = httpx.ASGITransport(app=create_app(container))
    async with httpx.AsyncClient(transport=asgi, base_url="http://test") as client:
        response = await client.post("/orders", json={"customer_id": "c-1", "amount": 5})
    assert response.status_code == 201
    request_span_name = "POST /orders"
{%- else %}
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("POST /things", kind=trace.SpanKind.SERVER):
        async with container.session_factory()() as session, session.begin():
            await container.outbox().create(
                session, OutboxItem, event_key="1", event_name="thing_created", payload={}
            )
    request_span_name = "POST /things"
{%- endif %}
    consumer = running_consumer(container, registry.get(INBOX_BOX))
    worker = running_worker(container, registry)
    async with consumer, worker:
        await wait_for(lambda: _at_least(container, OutboxItem, 1), within=30)
        await wait_for(lambda: _at_least(container, InboxItem, 1), within=30)
        await asyncio.sleep(0.2)
    finished = spans.get_finished_spans()
    request = by_name(finished, request_span_name)
    create = by_name(finished, f"{OUTBOX_BOX} create")
    process = by_name(finished, f"{OUTBOX_BOX} process")
    publish = by_name(finished, f"{env_topics} publish")
    receive = by_name(finished, f"{env_topics} receive")
    handle = by_name(finished, f"{INBOX_BOX} process")
    chain = [request, create, process, publish, receive, handle]
    assert len({s.context.trace_id for s in chain}) == 1
    # The item's INSERT is a database span of the request's trace.
    table = OutboxItem.__tablename__
    inserts = [
        s
        for s in finished
        if scope_of(s) == DB_INSTRUMENTATION
        and s.context.trace_id == request.context.trace_id
        and f"INSERT INTO {table}" in query_text(s)
    ]
    assert inserts, [query_text(s) for s in finished if scope_of(s) == DB_INSTRUMENTATION]
    assert parent_of(create) is not None
    assert parent_of(process) == create.context.span_id
    assert parent_of(publish) == process.context.span_id
    assert parent_of(receive) == publish.context.span_id
    assert parent_of(handle) == receive.context.span_id
    assert publish.attributes is not None
    assert publish.attributes["messaging.destination.name"] == env_topics
    assert process.attributes is not None
    assert process.attributes["outbox.attempt"] == 1
    # The publish span lasts until the delivery report, not just the hand-over.
    assert publish.end_time is not None
    assert publish.start_time is not None
    assert publish.end_time > publish.start_time


async def test_with_the_sdk_disabled_requests_make_no_spans_and_metrics_still_answer(
    container: Container, spans: InMemorySpanExporter
) -> None:
    """OTEL_SDK_DISABLED: the instrumentor's request middleware is not installed (it would
    build a span's name and attributes per request for nothing); requests are answered as
    before, and /metrics still answers. The SDK provider installed by
    `spans` records the middleware's spans if it is there (recent FastAPI versions record
    spans of their own, scope "fastapi", which cost nothing without an SDK provider)."""
    import httpx

    from {{ cookiecutter.package_name }}.api.app import create_app

    disabled = container.settings().model_copy(update={"otel_sdk_disabled": True})
    container.settings.override(disabled)
    try:
        app = create_app(container)
    finally:
        container.settings.reset_last_overriding()
    asgi = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=asgi, base_url="http://test") as client:
{%- if cookiecutter.include_example_domain %}
        created = await client.post("/orders", json={"customer_id": "c-1", "amount": "5.10"})
{%- else %}
        refused = await client.get("/admin/boxes")
{%- endif %}
        metrics = await client.get("/metrics")
{%- if cookiecutter.include_example_domain %}
    # The order comes back with its server defaults (returned by the INSERT).
    assert created.status_code == 201, created.text
    order = created.json()
    assert (order["amount"], order["status"], order["version"], order["paid_amount"]) == (
        5.1,
        "created",
        1,
        0.0,
    )
    assert order["id"] >= 1
    assert order["created_at"] == order["updated_at"]
{%- else %}
    # No ADMIN_TOKEN in the tests' settings: the admin API answers that it is off.
    assert refused.status_code == 503, refused.text
{%- endif %}
    assert metrics.status_code == 200
    # The exporter records what is started meanwhile: a span of the test's own is there.
    trace.get_tracer("test").start_span("probe").end()
    finished = spans.get_finished_spans()
    assert [s.name for s in finished if s.name == "probe"] == ["probe"]
    instrumentor = "opentelemetry.instrumentation.fastapi"
    assert [s.name for s in finished if scope_of(s) == instrumentor] == []


def metric(name: str, **labels: str) -> float:
    """The value of one Prometheus sample (0 when absent)."""
    text = render_metrics().decode()
    wanted = {k: v for k, v in labels.items()}
    for line in text.splitlines():
        match = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in wanted.items()):
            return float(match.group(3))
    return 0.0


async def test_counters_move_by_exactly_the_items_processed(
    container: Container, env_topics: str
) -> None:
    container.observer()
    event = f"e{uuid.uuid4().hex[:6]}"
    created_before = metric("outbox_items_created_total", box=OUTBOX_BOX, event=event)
    delivered_before = metric("outbox_items_delivered_total", box=OUTBOX_BOX, event=event)
    async with container.session_factory()() as session:
        async with session.begin():
            await container.outbox().create_batch(
                session,
                OutboxItem,
                [{"event_key": str(i), "event_name": event, "payload": b"x"} for i in range(7)],
            )
        async with session.begin():
            await container.outbox().create(
                session, OutboxItem, event_key="1", event_name=event, payload=b"x"
            )
            await session.rollback()
    assert metric("outbox_items_created_total", box=OUTBOX_BOX, event=event) - created_before == 7
    async with running_worker(container, make_registry()):
        await wait_for(lambda: _at_least(container, OutboxItem, 7), within=30)
    assert (
        metric("outbox_items_delivered_total", box=OUTBOX_BOX, event=event) - delivered_before == 7
    )
    assert metric("outbox_pending_depth", box=OUTBOX_BOX) >= 0


SPAN_SECRET = "secret-span-7f3"


class LeakyRefusal(InboxHandler):
    """Fails the way a refused write does: SQLAlchemy's error text carries the statement's
    parameters (here a value that must never reach a span)."""

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        raise IntegrityError(
            "INSERT INTO notes (note) VALUES ($1)",
            (SPAN_SECRET,),
            asyncpg.UniqueViolationError('duplicate key value violates unique constraint "n"'),
        )


async def test_a_failed_items_span_names_the_error_but_never_its_values(
    container: Container, spans: InMemorySpanExporter
) -> None:
    registry = make_registry(inbox={"transports": [transport(LeakyRefusal)], "max_retries": 0})
    box = registry.get(INBOX_BOX)
    async with container.engine().begin() as conn:
        await conn.execute(
            insert(InboxItem),
            [
                {
                    "uuid": uuid.uuid4(),
                    "event_name": "thing_refused",
                    "event_key": "k",
                    "bucket": box.bucket_for("k"),
                    "payload": b"{}",
                    "headers": {},
                }
            ],
        )
    async with running_worker(container, registry, boxes=[INBOX_BOX]):
        await wait_for(lambda: _at_least_failed(container, 1), within=20)
    process = by_name(spans.get_finished_spans(), f"{INBOX_BOX} process")
    assert process.status.status_code is StatusCode.ERROR
    expected = (
        'UniqueViolationError (SQLSTATE 23505): duplicate key value violates unique constraint "n"'
    )
    assert process.status.description == expected
    events = [(e.name, dict(e.attributes or {})) for e in process.events]
    assert events == [
        ("exception", {"exception.type": "IntegrityError", "exception.message": expected})
    ]
    exported = repr(process.to_json())
    for leak in (SPAN_SECRET, "[parameters", "INSERT INTO"):
        assert leak not in exported, leak


async def _at_least_failed(container: Container, expected: int) -> bool:
    return await count(container, InboxItem, ItemStatus.FAILED) >= expected
