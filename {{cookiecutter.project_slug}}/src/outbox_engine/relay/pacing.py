"""What the worker's parts share: the errors a database call can raise at them, a sleep
that a stop (or a wake-up) cuts short, and a pulse that wakes whoever sleeps at the moment
it fires (the lanes backing off from an outage when Kafka answers again).

Every loop of the worker (lanes, rebalance, Kafka check, depth, retention) sleeps through
`Pacer.sleep`, so SIGTERM ends every wait at once and the shutdown deadline is spent on
finishing batches, not on timers.
"""

from __future__ import annotations

import asyncio
import contextlib

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


class Pacer:
    """The worker's stop flag and the sleeps it ends."""

    def __init__(self) -> None:
        self.stopping = asyncio.Event()

    def stop(self) -> None:
        self.stopping.set()

    @property
    def stopped(self) -> bool:
        return self.stopping.is_set()

    async def sleep(self, seconds: float, wake: asyncio.Event | None = None) -> None:
        """Wait `seconds`, or less when the worker stops or `wake` is set."""
        waiters = [asyncio.ensure_future(self.stopping.wait())]
        if wake is not None:
            waiters.append(asyncio.ensure_future(wake.wait()))
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter


class Pulse:
    """An edge, not a state: `fire()` wakes every sleep that waits on `event()` at that
    moment and none that starts later. The lanes of the boxes that relay to Kafka wait on
    it while backing off from an outage (relay/lanes.py), and the Kafka check fires it when
    Kafka answers again or the producer's client was replaced (relay/readiness.py). A level
    (an Event left set while Kafka answers) would end every later back-off at once: a box
    whose topic the cluster answers for but does not take writes to (a partition without a
    leader) would have its lanes retry without a pause."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.fired = 0  # times fired since start

    def event(self) -> asyncio.Event:
        """The event the next `fire()` sets; take it when the sleep starts."""
        return self._event

    def fire(self) -> None:
        self.fired += 1
        self._event.set()
        self._event = asyncio.Event()
