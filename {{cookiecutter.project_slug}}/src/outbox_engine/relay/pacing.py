"""What the worker's parts share: the errors a database call can raise at them, a sleep
that a stop (or a wake-up) cuts short, and a pulse that wakes whoever sleeps at the moment
it fires (the lanes backing off from an outage when Kafka answers again).

Every loop of the worker (lanes, rebalance, Kafka check, depth, retention) sleeps through
`Pacer.sleep`, so SIGTERM ends every wait at once and the shutdown deadline is spent on
finishing batches, not on timers.

A lane sleeps between two batches whenever the load is light, so that sleep is on the hot
path of every item at a few hundred items a second: what ends it is a `Flag` (the worker's
stop flag, its lanes' wake-ups, a `Pulse`), and it waits on one future and one timer.
Waiting on plain `asyncio.Event`s took a task per event, `asyncio.wait`, and a cancellation
of each task afterwards: some ten more turns of the event loop for every wake-up.
"""

from __future__ import annotations

import asyncio

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.exc import DBAPIError, OperationalError

# What the database can raise at a lane: through SQLAlchemy, or from the asyncpg connection
# the relay's hot statements use directly (see pgconn.py).
DB_ERRORS = (
    DBAPIError,
    OperationalError,
    OSError,
    ConnectionError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)


class Flag(asyncio.Event):
    """An `asyncio.Event` that also ends the `Pacer.sleep`s waiting on it, without a task
    per sleep: `set()` resolves their futures as it resolves its own waiters'."""

    def __init__(self) -> None:
        super().__init__()
        self._sleepers: set[asyncio.Future[None]] = set()

    def set(self) -> None:
        super().set()
        for sleeper in self._sleepers:
            _wake_up(sleeper)

    def add_sleeper(self, sleeper: asyncio.Future[None]) -> None:
        self._sleepers.add(sleeper)

    def discard_sleeper(self, sleeper: asyncio.Future[None]) -> None:
        self._sleepers.discard(sleeper)


def _wake_up(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():
        sleeper.set_result(None)


class Pacer:
    """The worker's stop flag and the sleeps it ends."""

    def __init__(self) -> None:
        self.stopping = Flag()

    def stop(self) -> None:
        self.stopping.set()

    @property
    def stopped(self) -> bool:
        return self.stopping.is_set()

    async def sleep(self, seconds: float, wake: Flag | None = None) -> None:
        """Wait `seconds`, or less when the worker stops or `wake` is set (at once when it is
        set already; the event loop still gets a turn, as with any sleep)."""
        if self.stopping.is_set() or (wake is not None and wake.is_set()):
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        sleeper: asyncio.Future[None] = loop.create_future()
        flags = [self.stopping] if wake is None else [self.stopping, wake]
        for flag in flags:
            flag.add_sleeper(sleeper)
        timer = loop.call_later(max(seconds, 0.0), _wake_up, sleeper)
        try:
            await sleeper
        finally:
            timer.cancel()
            for flag in flags:
                flag.discard_sleeper(sleeper)


class Pulse:
    """An edge, not a state: `fire()` wakes every sleep that waits on `event()` at that
    moment and none that starts later. The lanes of the boxes that relay to Kafka wait on
    it while backing off from an outage (relay/lanes.py), and the Kafka check fires it when
    Kafka answers again or the producer's client was replaced (relay/readiness.py). A level
    (an Event left set while Kafka answers) would end every later back-off at once: a box
    whose topic the cluster answers for but does not take writes to (a partition without a
    leader) would have its lanes retry without a pause."""

    def __init__(self) -> None:
        self._event = Flag()
        self.fired = 0  # times fired since start

    def event(self) -> Flag:
        """The event the next `fire()` sets; take it when the sleep starts."""
        return self._event

    def fire(self) -> None:
        self.fired += 1
        self._event.set()
        self._event = Flag()
