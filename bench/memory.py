"""Memory: the resident set of the relay and of the inbox consumer while each works through
a large backlog (1M items; quick: 20k), sampled from /proc every half second.

- Relay: one relay process drains a backlog of `memory_backlog` pending items (a template
  of its own, built once per run on first use through the system's own create API, copied
  with FILE_COPY); progress is the pending count read from the database (the harness does
  not read the topic: a 1M-message reader would take a core from the relay).
- Consumer: the system's inbox consumer stores an input topic of as many distinct messages
  (produced once per run, each system consuming it with a group of its own); progress is
  the table's inserted-rows counter (`pg_stat_user_tables`), the end an exact count.

Per process: the highest RSS while the first half of the work is done (warm-up and the
first allocations included; start-up, the samples before any progress, is not), the
highest while the second half is done, and the peak overall (VmHWM). Flat = the second
half's highest is at most 10% above the first half's: a process that leaks per item keeps
growing through the second half (a leak of 10% of the first half's RSS over a half is
caught), while warm-up (librdkafka's prefetch queue filling, the interpreter's arenas)
ends early. Until 2026-11-30 flat compared the
peak after a tenth of the work with the RSS at that tenth; on a fast CPU a tenth of 1M
messages is three seconds in, inside warm-up (the consumer's RSS swung 150-207 MiB between
samples there), so a consumer that plateaued by a third of the work and grew 0.2-2.7% in
its second half was called "not flat". Target: peak < 250 MB for each, flat.
Checks: every item delivered (none left pending), every message stored once.
"""

from __future__ import annotations

import time
from typing import Any

from . import procs
from .context import Context, built_template
from .envs import log
from .kafka_io import delete_topics, produce_inbox_input
from .sizes import Sizes
from .systems import System, ours_worker_or_baseline

Case = dict[str, Any]
SAMPLE_S = 0.5
FLAT = 1.10  # the second half's highest RSS may be 10% above the first half's
LIMIT_MB = 250


def applies(system: System, case: Case) -> bool:
    return ours_worker_or_baseline(system)


def prepare(ctx: Context, system: System, case: Case) -> str:
    """The template with the large backlog, built (and settled) the first time."""
    count: int = case["items"]

    def fill(database: str) -> None:
        procs.run(
            system.fill_cmd(count, ctx.keys, ctx.size),
            procs.base_env(**system.env(ctx.pg.url(database))),
            ctx.logs / f"{system.name}-memory-fill.log",
            ctx.logs,
            timeout=7200,
        )

    return built_template(ctx, system, f"backlog{count}", fill, f"{count:,} items")


def _input_topic(ctx: Context, count: int) -> str:
    """The consumer's input, produced on first use and shared by every run."""
    if ctx.memory_topic is None:
        started = time.monotonic()
        topic = ctx.topic("memory-input")
        produce_inbox_input(ctx.bootstrap, topic, count, 0, ctx.keys, ctx.size)
        log(f"memory: {count:,} input messages produced in {time.monotonic() - started:.0f} s")
        ctx.memory_topic = topic
    return ctx.memory_topic


def _overall_peak(
    hwm: tuple[float, float] | None, samples: list[tuple[float, float, int]]
) -> float | None:
    """VmHWM, or the highest sample if higher: the kernel's resident-set counters are
    approximate (per-thread counts folded in lazily; memory released by madvise does not
    update the high-water mark), so a sample can read a few pages above a later VmHWM."""
    sampled = max((s[1] for s in samples), default=None)
    if hwm is None:
        return sampled
    return hwm[1] if sampled is None else max(hwm[1], sampled)


def halves(
    samples: list[tuple[float, float, int]], total: int
) -> tuple[float | None, float | None, bool | None]:
    """(first half's highest RSS, second half's highest, flat) of samples (seconds, RSS
    MiB, work done): a sample belongs to the first half once some work is done and while at
    most half of `total` is (the samples before any progress are start-up: imports and
    connecting, the process still growing into its working size), else to the second.
    Flat is None when either half has no sample (a process that never got past half its
    work, or a backlog gone before a sample saw it under way: quick sizes)."""
    first = [m for _t, m, done in samples if 0 < done <= total / 2 and m > 0]
    second = [m for _t, m, done in samples if done > total / 2 and m > 0]
    if not first or not second:
        return (max(first) if first else None, max(second) if second else None, None)
    return max(first), max(second), max(second) <= max(first) * FLAT


def _watch(
    child: procs.Child, progress: Any, total: int, timeout: float
) -> tuple[dict[str, Any], list[str]]:
    """Sample the child's RSS until `progress()` reaches `total` (or the child dies, or
    `timeout`); returns the memory record and the problems."""
    samples: list[tuple[float, float, int]] = []  # seconds, RSS MiB, done
    started = time.monotonic()
    done = 0
    while time.monotonic() - started < timeout and child.alive():
        memory = procs.memory_mb(child.proc.pid)
        done = progress()
        if memory is not None:
            samples.append((time.monotonic() - started, memory[0], done))
        if done >= total:
            break
        time.sleep(SAMPLE_S)
    hwm = procs.memory_mb(child.proc.pid)
    problems = [] if done >= total else [f"{done:,}/{total:,} done after {timeout:.0f} s"]
    if not child.alive():
        problems.append(f"exited early ({child.proc.returncode}): {child.tail(10)}")
    child.stop()
    finished = [s for s in samples if s[2] >= total]
    first = next((s for s in samples if s[2] > 0), None)
    span = (finished[0][0] - first[0]) if finished and first else 0.0
    first_half, second_half, flat = halves(samples, total)
    record = {
        "rss_mb_first_half": first_half,
        "rss_mb_second_half": second_half,
        "rss_mb_peak": _overall_peak(hwm, samples),
        "rate": total / span if span > 0 else None,
        "samples": [(round(t, 2), round(m, 1), d) for t, m, d in samples],
    }
    record["flat"] = flat
    return record, problems


def memory(ctx: Context, system: System, run_db: str, sizes: Sizes, case: Case) -> dict[str, Any]:
    count: int = case["items"]
    topic = ctx.topic(f"memory-{system.name}")
    table = system.outbox_table()
    relay = procs.Child(
        system.relay_cmd(topic),
        procs.base_env(**system.env(ctx.pg.url(run_db), topic)),
        ctx.logs / f"{system.name}-memory-relay.log",
        ctx.logs,
    )

    def delivered() -> int:
        pending = ctx.pg.fetchrow(run_db, f"SELECT count(*) FROM {table} WHERE status = 0")[0]
        return count - int(pending)

    relay_record, problems = _watch(relay, delivered, count, sizes.drain_timeout * 10)
    delete_topics(ctx.bootstrap, [topic])
    ctx.topics.remove(topic)

    command, extra = system.inbox_cmd(_input_topic(ctx, count))
    consumer = procs.Child(
        command,
        procs.base_env(**system.env(ctx.pg.url(run_db), **extra)),
        ctx.logs / f"{system.name}-memory-consumer.log",
        ctx.logs,
    )
    inbox = system.inbox_table()

    def inserted() -> int:
        row = ctx.pg.fetchrow(
            run_db, "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = $1", inbox
        )
        if row is None or int(row[0]) < count:
            return int(row[0]) if row else 0
        return int(ctx.pg.fetchrow(run_db, f"SELECT count(*) FROM {inbox}")[0])

    consumer_record, consumer_problems = _watch(consumer, inserted, count, sizes.inbox_timeout * 10)
    stored, unique = ctx.pg.fetchrow(run_db, f"SELECT count(*), count(DISTINCT uuid) FROM {inbox}")
    left = int(ctx.pg.fetchrow(run_db, f"SELECT count(*) FROM {table} WHERE status = 0")[0])
    peaks = [r["rss_mb_peak"] for r in (relay_record, consumer_record) if r["rss_mb_peak"]]
    return {
        "system": system.name,
        "items": count,
        "relay": relay_record,
        "consumer": consumer_record,
        "left_pending": left,
        "stored": int(stored),
        "stored_duplicates": int(stored) - int(unique),
        "lost": count - int(unique),
        "peak_mb": max(peaks) if peaks else float("nan"),
        "problems": [f"relay: {p}" for p in problems]
        + [f"consumer: {p}" for p in consumer_problems],
    }
