"""Two services baked from this template, wired through Kafka, as two teams would run them.

`orders` is the default bake (the example domain): `POST /orders` emits `order_created` to
the topic `orders`, and a `payment_received` on `payments` pays the order and emits
`order_paid`. `billing` is baked without the example domain, with its outbox item named
`payment` and its inbox item `order`, so its boxes read `orders` and write `payments` out of
the box. Its team then does what the README's "Wiring two services" says: one handler of
its own (`ChargeOrderHandler`: an `order_created` becomes a `payment_received` for the
order's amount, created through the outbox in the handler's transaction) and one line of
`config/boxes.yaml`.

Both run as real processes (api, worker, consumer each) on real PostgreSQL (a database each)
and Kafka (topics of this run), exporting their spans over OTLP to a receiver in this test.
The checks:

* every order ends paid exactly its amount (a payment handled twice would double it);
* every message crossed once in effect: billing stored each order event once and created
  one payment per order; orders stored each payment once;
* one trace per order links `POST /orders` in orders to billing's handler and back to the
  orders handler that applied the payment (spans of both services' processes).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import asyncpg
import pytest

from combos import SUPPORTED, Combo
from conftest import Bakery, Installed, Services, run, tail
from test_generated_suite import admin_dsn, database_url, free_port

pytestmark = [pytest.mark.bake, pytest.mark.services]

ORDERS = next(combo for combo in SUPPORTED if combo.id == "default")
BILLING = Combo(
    "billing",
    {
        "project_name": "Billing Service",
        "include_example_domain": False,
        "outbox_item": "payment",
        "inbox_item": "order",
    },
)
ORDER_COUNT = 20
AMOUNTS = [Decimal(f"{10 + n}.{n:02d}") for n in range(ORDER_COUNT)]
SETTLE_TIMEOUT = 120
READY_TIMEOUT = 60

# What billing's team writes (the README's "Wiring two services" shows the same).
CHARGE_HANDLER = '''

import json as _json

from outbox_engine import Outbox, Resources

from ..items import PaymentOutboxItem


class ChargeOrderHandler(InboxHandler):
    """Charges each new order: `order_created` -> `payment_received` for its amount."""

    _outbox: Outbox | None = None

    async def setup(self, resources: Resources) -> None:
        self._outbox = resources.outbox

    async def handle(self, item: ItemRecord, payload: bytes, session: AsyncSession) -> bool:
        assert self._outbox is not None, "setup() was not called"
        order = _json.loads(payload)
        await self._outbox.create(
            session,
            PaymentOutboxItem,
            event_key=order["id"],
            event_name="payment_received",
            payload={"order_id": order["id"], "amount": order["amount"]},
        )
        return True
'''


def wire_billing(root: Path) -> None:
    """Billing's team: add the handler, route `order_created` to it in boxes.yaml (the
    generated log handler stays, for every event of the topic: `order_paid` too)."""
    handlers = root / "src" / "billing_service" / "transports" / "order_inbox_item.py"
    handlers.write_text(handlers.read_text() + CHARGE_HANDLER)
    boxes = root / "config" / "boxes.yaml"
    text = boxes.read_text()
    line = "      - class: billing_service.transports.order_inbox_item:OrderLogHandler\n"
    assert line in text, "the no-example bake's inbox handler line moved; update this test"
    boxes.write_text(
        text.replace(
            line,
            line + "      - class: billing_service.transports.order_inbox_item:ChargeOrderHandler\n"
            "        event_name: order_created\n",
        )
    )


class SpanSink:
    """An OTLP/HTTP endpoint on 127.0.0.1 that keeps the bodies posted to /v1/traces."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.count = 0
        lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.endswith("/v1/traces"):
                    with lock:
                        sink.count += 1
                        (sink.directory / f"{sink.count:06d}.pb").write_bytes(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SpanSink:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# Decoded with the baked venv's opentelemetry-proto (a dev dependency of the baked project).
DECODE = """
import json, sys
from pathlib import Path
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
spans = []
for path in sorted(Path(sys.argv[1]).glob("*.pb")):
    request = ExportTraceServiceRequest.FromString(path.read_bytes())
    for resource in request.resource_spans:
        service = next(
            (a.value.string_value for a in resource.resource.attributes if a.key == "service.name"),
            "",
        )
        for scope in resource.scope_spans:
            for span in scope.spans:
                spans.append({"trace": span.trace_id.hex(), "name": span.name, "service": service})
print(json.dumps(spans))
"""


class Service:
    """One baked service's processes on a database of its own."""

    def __init__(self, name: str, installed: Installed, env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.installed = installed
        self.env = env
        self.logs = logs
        self.api_port = free_port()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, stack: ExitStack) -> None:
        run([self.installed.script, "migrate"], cwd=self.installed.root, env=self.env)
        commands = {
            "api": ["api", "--host", "127.0.0.1", "--port", str(self.api_port)],
            "worker": ["worker", "--probe-port", "0"],
            "consumer": ["consumer", "--probe-port", "0"],
        }
        for role, args in commands.items():
            log = stack.enter_context((self.logs / f"{self.name}-{role}.log").open("w"))
            env = {**self.env, "OTEL_SERVICE_NAME": f"{self.name}-{role}"}
            self.processes[role] = subprocess.Popen(
                [str(self.installed.script), *args],
                cwd=self.installed.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        stack.callback(self.stop)

    def stop(self) -> dict[str, int | None]:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for role, process in self.processes.items():
            try:
                codes[role] = process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[role] = process.wait()
        return codes

    def check_alive(self) -> None:
        for role, process in self.processes.items():
            if process.poll() is not None:
                log = (self.logs / f"{self.name}-{role}.log").read_text()
                pytest.fail(
                    f"{self.name} {role} exited with {process.returncode}:\n{tail(log)}",
                    pytrace=False,
                )

    def http(self, method: str, path: str, body: object = None) -> dict[str, object]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}{path}",
            data=data,
            method=method,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answer: dict[str, object] = json.loads(response.read())
            return answer

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        last = "no answer"
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                if self.http("GET", "/readyz").get("status") == "ready":
                    return
            except urllib.error.HTTPError as exc:
                last = f"{exc.code}"
            except OSError as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.5)
        pytest.fail(f"{self.name} api not ready within {READY_TIMEOUT}s ({last})", pytrace=False)


async def _fetch(url: str, query: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        return list(await conn.fetch(query))
    finally:
        await conn.close()


def fetch(url: str, query: str) -> list[asyncpg.Record]:
    return asyncio.run(_fetch(url, query))


@contextmanager
def databases(services: Services, count: int) -> Iterator[list[str]]:
    names = [f"two_{uuid.uuid4().hex[:12]}" for _ in range(count)]

    async def admin(*statements: str) -> None:
        conn = await asyncpg.connect(admin_dsn(services))
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(admin(*(f'CREATE DATABASE "{name}"' for name in names)))
    try:
        yield [database_url(services, name) for name in names]
    finally:
        asyncio.run(
            admin(
                *(
                    f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE datname = '{name}'"
                    for name in names
                ),
                *(f'DROP DATABASE IF EXISTS "{name}"' for name in names),
            )
        )


def wait_until(check: Callable[[], bool], services: list[Service], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for service in services:
            service.check_alive()
        if check():
            return True
        time.sleep(1)
    return False


def test_orders_and_billing_settle_every_order_once_in_one_trace(
    bakery: Bakery, services: Services, tmp_path: Path
) -> None:
    orders_installed = bakery.install(ORDERS)
    billing_installed = bakery.install(BILLING)
    wire_billing(billing_installed.root)
    run(  # billing's edit is code its team would type-check too
        [billing_installed.bin("mypy"), "-p", "billing_service"],
        cwd=billing_installed.root,
        env=billing_installed.env(),
    )
    with databases(services, 2) as (orders_url, billing_url):
        ids = run_both(
            orders_installed, billing_installed, services, orders_url, billing_url, tmp_path
        )
        check_effects(orders_url, billing_url, ids)
    check_traces(orders_installed, tmp_path)
    tracebacks = [p.name for p in tmp_path.glob("*.log") if "Traceback" in p.read_text()]
    assert tracebacks == [], logs_of(tmp_path)


def logs_of(directory: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{tail(p.read_text(), 15)}" for p in sorted(directory.glob("*.log"))
    )


def run_both(
    orders_installed: Installed,
    billing_installed: Installed,
    services: Services,
    orders_url: str,
    billing_url: str,
    tmp_path: Path,
) -> list[int]:
    """Starts both services, sends ORDER_COUNT orders through them, waits until every one
    is paid, stops every process (exit codes checked); returns the order ids."""
    run_id = uuid.uuid4().hex[:8]
    shared = {
        "KAFKA_BOOTSTRAP_SERVERS": services.kafka_bootstrap_servers,
        "LOG_FORMAT": "text",
        "ORDER_EVENTS_TOPIC": f"orders-{run_id}",
        "PAYMENT_EVENTS_TOPIC": f"payments-{run_id}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    (tmp_path / "spans").mkdir()
    with SpanSink(tmp_path / "spans") as sink, ExitStack() as stack:
        shared["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.endpoint
        orders = Service(
            "orders",
            orders_installed,
            orders_installed.env(DATABASE_URL=orders_url, **shared),
            tmp_path,
        )
        billing = Service(
            "billing",
            billing_installed,
            billing_installed.env(DATABASE_URL=billing_url, **shared),
            tmp_path,
        )
        both = [orders, billing]
        for service in both:
            service.start(stack)
        for service in both:
            service.wait_ready()
        created = [
            orders.http("POST", "/orders", {"customer_id": f"c-{n}", "amount": str(amount)})
            for n, amount in enumerate(AMOUNTS)
        ]

        def all_paid() -> bool:
            rows = fetch(orders_url, "SELECT amount, paid_amount FROM orders")
            return len(rows) == ORDER_COUNT and all(r["paid_amount"] == r["amount"] for r in rows)

        settled = wait_until(all_paid, both, SETTLE_TIMEOUT)
        if settled:
            time.sleep(3)  # a duplicate still in flight would land meanwhile
        codes = {f"{s.name} {role}": code for s in both for role, code in s.stop().items()}
    assert settled, f"not every order was paid within {SETTLE_TIMEOUT}s\n{logs_of(tmp_path)}"
    # uvicorn ends by re-raising the SIGTERM it handled; the others exit 0.
    expected = {name: -signal.SIGTERM if name.endswith(" api") else 0 for name in codes}
    assert codes == expected, f"{codes}\n{logs_of(tmp_path)}"
    return [int(str(order["id"])) for order in created]


def check_effects(orders_url: str, billing_url: str, ids: list[int]) -> None:
    """Every order paid exactly its amount; every message stored and applied once."""
    paid = fetch(orders_url, "SELECT id, amount, paid_amount FROM orders ORDER BY id")
    assert [r["id"] for r in paid] == sorted(ids)
    assert [r["paid_amount"] for r in paid] == [r["amount"] for r in paid] == AMOUNTS
    billing_inbox = fetch(
        billing_url,
        "SELECT event_name, count(*) AS n, count(DISTINCT uuid) AS distinct_ids, "
        "count(*) FILTER (WHERE status = 2) AS delivered FROM order_inbox_items GROUP BY 1",
    )
    assert {r["event_name"]: tuple(r)[1:] for r in billing_inbox} == {
        "order_created": (ORDER_COUNT, ORDER_COUNT, ORDER_COUNT),
        "order_paid": (ORDER_COUNT, ORDER_COUNT, ORDER_COUNT),
    }
    payments = fetch(billing_url, "SELECT event_key FROM payment_outbox_items")
    assert sorted(int(r["event_key"]) for r in payments) == sorted(ids)
    orders_inbox = fetch(
        orders_url,
        "SELECT count(*) AS n, count(DISTINCT uuid) AS distinct_ids, "
        "count(*) FILTER (WHERE status = 2) AS delivered FROM payment_inbox_items",
    )
    assert tuple(orders_inbox[0]) == (ORDER_COUNT, ORDER_COUNT, ORDER_COUNT)


def check_traces(orders_installed: Installed, tmp_path: Path) -> None:
    """One trace per order: `POST /orders` in orders, billing's handler, and the orders
    handler that applied the payment, from spans both services exported."""
    decoded = run(
        [orders_installed.bin("python"), "-c", DECODE, str(tmp_path / "spans")],
        cwd=orders_installed.root,
    )
    spans = json.loads(decoded.stdout.strip().splitlines()[-1])
    traces: dict[str, set[tuple[str, str]]] = {}
    for span in spans:
        traces.setdefault(span["trace"], set()).add((span["service"], span["name"]))
    requests = {t for t, names in traces.items() if ("orders-api", "POST /orders") in names}
    assert len(requests) == ORDER_COUNT, sorted({n for names in traces.values() for n in names})
    through = {
        t
        for t in requests
        if ("billing-worker", "order_inbox_item process") in traces[t]
        and ("orders-worker", "payment_inbox_item process") in traces[t]
    }
    missing = {t: sorted(traces[t]) for t in requests - through}
    assert len(through) == ORDER_COUNT, f"traces that stop short: {missing}"
