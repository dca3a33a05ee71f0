"""The one thread on which every call on an inbox consumer's Kafka client runs.

Why one, and why its own: a call on a confluent-kafka `Consumer` made from a second thread
while another thread waits in `consume()` does not return until that wait ends or pauses,
and burns CPU meanwhile (measured with confluent-kafka 2.16: five idle consumers took
0.35-0.40% of a core; with one `committed()`, `list_topics()` or `commit()` every 10 s per
consumer from a second thread, 9-11%). So the fetch, the offset commits, the Kafka check,
the lag report and the close of one consumer go through one thread, in the order handed
over: a commit or a check waits for the fetch in flight (at most `poll_timeout`, and no
time at all under load, when fetches return at once), as it did on a thread of its own,
without the spinning. A thread per consumer, not the event loop's default executor: that
one has min(32, CPUs + 4) threads for the whole process, and on two cores a process of
7+ inbox boxes had fewer threads than fetches, so boxes' fetches queued behind other
boxes' one-second waits.

The thread starts with the first call and, after `close()`, with the next one again (a
consumer that runs twice gets a fresh thread each time).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class ConsumerThread:
    """Runs blocking calls one after the other, in the order given, on one thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._executor: ThreadPoolExecutor | None = None

    def call(self, fn: Callable[..., T], *args: object) -> asyncio.Future[T]:
        """`fn(*args)` on the thread, after every call handed over before; the future is
        the event loop's, so it can be awaited, gathered or left to run."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"kafka-{self.name}"
            )
        return asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        """No more calls for now: the thread ends once those handed over have run (the
        caller awaits them first); a later `call` starts a new one."""
        if self._executor is not None:
            executor, self._executor = self._executor, None
            executor.shutdown(wait=False)
