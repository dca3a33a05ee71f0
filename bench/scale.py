"""Many workers: ours' outbox box with 256 buckets, worker processes joining one by one and
then leaving one by one while a steady load runs.

What is measured per change of membership is how long the box is not fully served: from
the change (a new worker's member lock appears in `pg_locks`, or SIGTERM is sent to a
leaving one) until the box is *settled* again: exactly the expected number of members,
every one of the 256 buckets locked by one of them, and none holding more than its share
(ceil(256 / members), what each worker aims for). Ownership is read from PostgreSQL's own
`pg_locks` every 10 ms (the advisory locks of store/ownership.py), not from the workers'
logs. The topic is read back throughout: per-key order of first deliveries, nothing lost.

Only ours runs it: the baseline's ownership is static (process i of n owns b % n == i) and
the peers have no bucket ownership to measure.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from . import procs
from .context import PARTITIONS, Context
from .kafka_io import TopicReader
from .sizes import Sizes
from .systems import System

Case = dict[str, Any]
# store/ownership.py: a worker's member lock is MEMBER_BASE + its slot (< MAX_MEMBERS), a
# bucket's lock its number; other keys (retention's RETENTION_LOCK) are not ownership.
MEMBER_BASE, MAX_MEMBERS = 1_000_000, 4096
LOCKS = """
SELECT pid, objid::bigint FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 2
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


@dataclass
class Sample:
    at: float
    members: int
    owned: int  # distinct buckets locked
    most: int  # the most buckets one member holds


@dataclass
class Watcher:
    """Polls the run database's advisory locks on its own connection, in a thread."""

    url: str
    interval: float = 0.01
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    async def _run(self) -> None:
        try:
            conn = await asyncpg.connect(self.url)
            try:
                while not self._stop.is_set():
                    self.samples.append(_sample(await conn.fetch(LOCKS)))
                    await asyncio.sleep(self.interval)
            finally:
                await conn.close()
        except Exception as exc:  # reported with the results; the run then fails its checks
            self.problems.append(f"lock watcher: {exc!r}")

    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None


def _sample(rows: list[Any]) -> Sample:
    held: dict[int, int] = {}
    buckets = set()
    members = 0
    for pid, objid in rows:
        if MEMBER_BASE <= objid < MEMBER_BASE + MAX_MEMBERS:
            members += 1
        elif objid < MEMBER_BASE:
            buckets.add(objid)
            held[pid] = held.get(pid, 0) + 1
    return Sample(time.time(), members, len(buckets), max(held.values(), default=0))


def boxes_file(system: System, workdir: Path, buckets: int) -> Path:
    """The project's config/boxes.yaml with the outbox box's bucket_count set to `buckets`."""
    assert system.project is not None
    text = (system.project.root / "config" / "boxes.yaml").read_text()
    head = f"\n  {system.project.outbox_box}:\n"
    start = text.index(head) + len(head)
    line = "    bucket_count: 16\n"
    at = text.index(line, start)
    path = workdir / f"boxes-{buckets}-buckets.yaml"
    path.write_text(text[:at] + f"    bucket_count: {buckets}\n" + text[at + len(line) :])
    return path


def settled(sample: Sample, members: int, buckets: int) -> bool:
    share = -(-buckets // members)  # ceil
    return sample.members == members and sample.owned == buckets and sample.most <= share


def _wait(
    watcher: Watcher, members: int, buckets: int, since: float, timeout: float
) -> float | None:
    """Seconds from `since` until the box is settled with `members` workers; None if not
    within `timeout`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        sample = watcher.latest()
        if sample is not None and sample.at > since and settled(sample, members, buckets):
            return sample.at - since
        time.sleep(0.005)
    return None


def _joined(watcher: Watcher, members: int, timeout: float) -> float | None:
    """When the member lock count first reached `members` (the new worker joined)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        sample = watcher.latest()
        if sample is not None and sample.members >= members:
            return sample.at
        time.sleep(0.005)
    return None


def scale(ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case) -> dict[str, Any]:
    workers, buckets, step = case["workers"], case["buckets"], sizes.scale_step
    topic = ctx.topic(f"scale-{system.name}-{workers}")
    boxes = boxes_file(system, ctx.logs, buckets)
    env = procs.base_env(**system.env(ctx.pg.url(run_db), topic, BOXES_FILE=str(boxes)))
    seconds = step * (2 * workers + 2)  # every join and leave, with a step before and after
    per_tx = max(1, round(sizes.scale_rate / sizes.tx_rate))
    tx_rate = sizes.scale_rate / per_tx
    total = round(tx_rate * seconds) * per_tx
    reader = TopicReader(ctx.bootstrap, topic, PARTITIONS, total)
    reader.start()
    watcher = Watcher(ctx.pg.url(run_db, driver="postgresql"))
    watcher.start()
    out = ctx.logs / f"{system.name}-scale-commits.json"
    load = procs.Child(
        system.load_cmd(0, tx_rate, per_tx, seconds, ctx.keys, ctx.size, out),
        env,
        ctx.logs / f"{system.name}-scale-load.log",
        ctx.logs,
    )
    children: list[procs.Child] = []
    changes: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        for n in range(1, workers + 1):
            started = time.time()
            children.append(
                procs.Child(
                    system.relay_cmd(topic),
                    env,
                    ctx.logs / f"{system.name}-scale-w{n}.log",
                    ctx.logs,
                )
            )
            joined = _joined(watcher, n, 60.0)
            settle = None if joined is None else _wait(watcher, n, buckets, joined, 30.0)
            changes.append(
                {"change": "join", "workers": n, "start_s": _s(joined, started), "settle_s": settle}
            )
            time.sleep(max(0.0, started + step - time.time()))
        for n in range(workers - 1, 0, -1):
            leaving = children.pop()
            sent = time.time()
            leaving.proc.terminate()
            settle = _wait(watcher, n, buckets, sent, 30.0)
            changes.append({"change": "leave", "workers": n, "start_s": None, "settle_s": settle})
            leaving.stop()
            time.sleep(max(0.0, sent + step - time.time()))
        if load.proc.wait(seconds * 3 + 120):
            problems.append(f"load exited {load.proc.returncode}: {load.tail(10)}")
        complete = reader.wait(60.0)
    finally:
        for child in [*children, load]:
            if not child.alive() and child is not load and child.proc.returncode:
                problems.append(f"worker exited early ({child.proc.returncode}): {child.tail(10)}")
            child.stop()
        watcher.stop()
    problems += watcher.problems
    committed = len(json.loads(out.read_text())["commits"])
    seen = reader.result
    times = [c["settle_s"] for c in changes]
    return {
        "system": system.name,
        "workers": workers,
        "buckets": buckets,
        "changes": changes,
        "unsettled": sum(1 for t in times if t is None),
        "max_settle_ms": max((t for t in times if t is not None), default=float("nan")) * 1000,
        "committed": committed,
        "delivered": seen.distinct,
        "complete": complete,
        "lost": committed - seen.distinct,
        "duplicates": seen.duplicates(),
        "order_violations": seen.order_violations(),
        "samples": len(watcher.samples),
        "problems": problems,
    }


def _s(at: float | None, since: float) -> float | None:
    return None if at is None else at - since
