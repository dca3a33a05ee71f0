"""Mixed load (ours alone): the service as it runs in production, every path at once. The
bake's `api` takes POST /orders at `mixed_rate` a second while payments arrive on its
input topic at `mixed_inbox_rate` a second; one `worker` (all boxes: it relays the order
events and handles the stored payments) and one `consumer` run beside it.

Three paths, each with its rate and its latency percentiles:
- api: POST /orders by a paced client (drivers/http_load.py, keep-alive connections);
  latency from the time a request was due to its response, so a server that falls behind
  shows it.
- relay: `order_created` of each order, from its transaction's start (the order's
  `created_at`, PostgreSQL's now(); the commit follows within milliseconds) to the message
  on the orders topic. (Not from the POST's response: a saturated api answers after its
  message is out.)
- inbox: each `payment_received` (for one of `mixed_orders` orders created before the clock
  starts), from its produce call to the `order_paid` it leads to on the orders topic:
  stored by the consumer, handled by the worker in the transaction that adds to the order's
  paid amount, relayed.

The baseline has no API and no handlers, and the peers neither, so ours runs alone. The
first `warmup` seconds of both loads are not counted.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Producer

from . import procs
from .context import PARTITIONS, Context
from .envs import DRIVERS
from .kafka_io import TopicReader
from .scenarios import percentile
from .sizes import Sizes
from .systems import System

Case = dict[str, Any]
PAID = 10**12  # sequence numbers of order_paid messages: PAID + the payment's index
READY_S = 60.0
AFTER_S = 20.0  # to deliver what is still in flight once the loads end


def applies(system: System, case: Case) -> bool:
    return system.project is not None and not system.debezium


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(port: int, children: list[procs.Child]) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline and all(c.alive() for c in children):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    tails = "; ".join(c.tail(5) for c in children if not c.alive())
    raise RuntimeError(f"the api did not become ready in {READY_S:.0f} s {tails}")


def _create_orders(port: int, count: int) -> list[int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    ids = []
    for n in range(count):
        body = json.dumps({"customer_id": f"payer-{n}", "amount": "100000.00"})
        conn.request("POST", "/orders", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status != 201:
            raise RuntimeError(f"POST /orders: {response.status} {data[:200]!r}")
        ids.append(int(json.loads(data)["id"]))
    return ids


class Payments(threading.Thread):
    """Produces `payment_received` for the given orders at `rate` a second for `duration`;
    `sent[i]` = (message id, produce time)."""

    def __init__(self, bootstrap: str, topic: str, orders: list[int], rate: float, duration: float):
        super().__init__(daemon=True, name="payments")
        self.topic, self.orders, self.rate, self.duration = topic, orders, rate, duration
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self.sent: list[tuple[str, float]] = []
        self.index: dict[str, int] = {}

    def run(self) -> None:
        started = time.monotonic()
        for n in range(round(self.rate * self.duration)):
            delay = started + n / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            order = self.orders[n % len(self.orders)]
            message_id = str(uuid.uuid4())
            self.index[message_id] = n
            self.sent.append((message_id, time.time()))
            self.producer.produce(
                self.topic,
                json.dumps({"order_id": order, "amount": 0.01}).encode(),
                str(order).encode(),
                headers=[("message-id", message_id.encode()), ("event-name", b"payment_received")],
            )
            self.producer.poll(0)
        if self.producer.flush(60):
            raise RuntimeError("payments not delivered to Kafka")


def _parser(payments: Payments) -> Any:
    def parse(value: bytes | None) -> int | None:
        """order_created: the order's id; order_paid: PAID + the payment's index."""
        try:
            doc = json.loads(value or b"")
        except ValueError:
            return None
        payment = doc.get("payment_id")
        if payment is not None:
            n = payments.index.get(payment)
            return None if n is None else PAID + n
        return int(doc["id"]) if "id" in doc else None

    return parse


def _percentiles(values: list[float]) -> dict[str, float | None]:
    """p50 and p99 as the steady scenario takes them (None when there is nothing)."""
    if not values:
        return {"p50": None, "p99": None}
    return {"p50": percentile(values, 50), "p99": percentile(values, 99)}


def mixed(ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case) -> dict[str, Any]:
    assert system.project is not None
    out_topic, in_topic = ctx.topic("mixed-orders"), ctx.topic("mixed-payments")
    port = _free_port()
    env = procs.base_env(
        **system.env(ctx.pg.url(run_db), out_topic, **{system.project.inbox_topic_env: in_topic})
    )
    script = str(system.project.script)
    children = [
        procs.Child([script, *argv], env, ctx.logs / f"{system.name}-mixed-{name}.log", ctx.logs)
        for name, argv in (
            ("api", ["api", "--host", "127.0.0.1", "--port", str(port)]),
            ("worker", ["worker"]),
            ("consumer", ["consumer"]),
        )
    ]
    problems: list[str] = []
    reader: TopicReader | None = None
    try:
        _ready(port, children)
        orders = _create_orders(port, sizes.mixed_orders)
        payments = Payments(
            ctx.bootstrap, in_topic, orders, sizes.mixed_inbox_rate, sizes.mixed_seconds
        )
        reader = TopicReader(ctx.bootstrap, out_topic, PARTITIONS, 10**12, _parser(payments))
        reader.start()
        out = ctx.logs / f"{system.name}-mixed-requests.json"
        payments.start()
        load = [sys.executable, str(DRIVERS / "http_load.py"), "--port", str(port)]
        load += ["--rate", str(sizes.mixed_rate), "--duration", str(sizes.mixed_seconds)]
        load += ["--connections", str(sizes.mixed_connections), "--out", str(out)]
        procs.run(
            load,
            procs.base_env(),
            ctx.logs / f"{system.name}-mixed-load.log",
            ctx.logs,
            timeout=sizes.mixed_seconds * 20 + 120,
        )
        payments.join(sizes.mixed_seconds * 5 + 60)
        requests = json.loads(out.read_text())
        created = {int(r[3]): r[1] for r in requests["requests"] if r[2] == 201}
        reader.expected = len(orders) + len(created) + len(payments.sent)
        reader.wait(AFTER_S)
    finally:
        if reader is not None:
            reader.stop()
        for child in children:
            if not child.alive():
                problems.append(f"exited early ({child.proc.returncode}): {child.tail(10)}")
            child.stop()
    seen = reader.result.first_at
    start = min(r[0] for r in requests["requests"]) + sizes.mixed_warmup
    counted = [r for r in requests["requests"] if r[0] >= start]
    api_ms = [(r[1] - r[0]) * 1000 for r in counted if r[2] == 201]
    # From the order's transaction start (its created_at, PostgreSQL's now(); the commit
    # follows within milliseconds) to its order_created on the topic: the client's response
    # can come after the message when the api is saturated.
    began = {
        int(row[0]): float(row[1])
        for row in ctx.pg.fetch(run_db, "SELECT id, extract(epoch FROM created_at) FROM orders")
    }
    relay_ms = [
        (seen[int(r[3])] - began[int(r[3])]) * 1000
        for r in counted
        if r[2] == 201 and int(r[3]) in seen and int(r[3]) in began
    ]
    first_payment = payments.sent[0][1] + sizes.mixed_warmup if payments.sent else 0.0
    paid = [(n, at) for n, (_, at) in enumerate(payments.sent) if at >= first_payment]
    inbox_ms = [(seen[PAID + n] - at) * 1000 for n, at in paid if PAID + n in seen]
    api = _percentiles(api_ms)
    relay = _percentiles(relay_ms)
    inbox = _percentiles(inbox_ms)
    handled = [seen[PAID + n] for n in range(len(payments.sent)) if PAID + n in seen]
    inbox_span = max(handled) - payments.sent[0][1] if handled else 0.0
    return {
        "system": system.name,
        "api_target_rate": sizes.mixed_rate,
        "api_rate": len(created) / float(requests["elapsed"]),
        "api_errors": sum(1 for r in requests["requests"] if r[2] != 201),
        "api_p50": api["p50"],
        "api_p99": api["p99"],
        "relay_p50": relay["p50"],
        "relay_p99": relay["p99"],
        "relay_undelivered": sum(1 for i in created if i not in seen),
        "inbox_target_rate": sizes.mixed_inbox_rate,
        "inbox_sent": len(payments.sent),
        # Payments handled (their order_paid on the topic) per second, from the first sent.
        "inbox_rate": len(handled) / inbox_span if inbox_span > 0 else 0.0,
        "inbox_p50": inbox["p50"],
        "inbox_p99": inbox["p99"],
        "inbox_unhandled": sum(1 for n in range(len(payments.sent)) if PAID + n not in seen),
        "problems": problems,
    }
