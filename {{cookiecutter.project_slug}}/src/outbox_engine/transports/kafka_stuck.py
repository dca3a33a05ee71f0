"""When a producer's librdkafka client is stuck and should be replaced.

Seen once in this project's CI rehearsals (one Kafka-restart scenario in some twenty run
here): after a one-broker cluster restarted, one worker's client logged "new leader-1 not
found in cache" for its partitions and then timed out every message to two of them
(`_MSG_TIMED_OUT`, attempts 25 s apart: `message.timeout.ms`) for the 190 s the test
waited, while the other worker, against the same cluster, delivered everything. The relay
counts a timeout as an outage (the item stays pending, no retry consumed): nothing was
lost, nothing moved. Whether that client's own metadata requests were answered was not
recorded, so `KafkaProducer.recover` replaces the client (a new librdkafka instance, the
same settings) in either case:

(a) the checks pass and partitions are stuck here: the cluster lists their leaders;
(b) the checks have failed for `after_seconds` while a client made now gets an answer.

`StuckPartitions` keeps, per (topic, partition), the timeouts reported since the last
message delivered to it. A partition is *stuck* when it has at least `min_timeouts`
timeouts, the first at least `after_seconds` ago and the last within `after_seconds` (an
old streak that stopped is forgotten: the partition may simply have had no traffic since).
Streaks are forgotten whenever a check fails (timeouts while the cluster does not answer
are an outage, case (b)'s business), so a long outage alone never makes a partition stuck.
Reports arrive on the producer's poll thread; every method takes the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

Partition = tuple[str, int]


@dataclass
class _Streak:
    first: float
    last: float
    timeouts: int = 1


class StuckPartitions:
    def __init__(
        self,
        after_seconds: float = 60.0,
        min_timeouts: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if after_seconds <= 0:
            raise ValueError(f"after_seconds must be more than 0, not {after_seconds}")
        if min_timeouts < 1:
            raise ValueError(f"min_timeouts must be 1 or more, not {min_timeouts}")
        self.after_seconds = after_seconds
        self.min_timeouts = min_timeouts
        self.clock = clock
        self._streaks: dict[Partition, _Streak] = {}
        self._lock = threading.Lock()

    @property
    def watching(self) -> bool:
        """Whether any partition has timeouts: only then is a delivered message's partition
        looked at (the usual batch pays nothing for this)."""
        return bool(self._streaks)

    def timed_out(self, topic: str, partition: int) -> None:
        """A message to `partition` timed out. A partition not yet assigned (-1: librdkafka
        never learnt the topic) is not a stuck partition but an unknown topic: ignored."""
        if partition < 0:
            return
        now = self.clock()
        with self._lock:
            streak = self._streaks.get((topic, partition))
            if streak is None:
                self._streaks[(topic, partition)] = _Streak(now, now)
            else:
                streak.last = now
                streak.timeouts += 1

    def delivered(self, topic: str, partition: int) -> None:
        """A message to `partition` was written: its streak ends."""
        if (topic, partition) in self._streaks:
            with self._lock:
                self._streaks.pop((topic, partition), None)

    def stuck(self) -> list[Partition]:
        """The stuck partitions, by topic and partition; forgets streaks that stopped."""
        now = self.clock()
        with self._lock:
            for key in [k for k, s in self._streaks.items() if now - s.last > self.after_seconds]:
                del self._streaks[key]
            return sorted(
                key
                for key, s in self._streaks.items()
                if s.timeouts >= self.min_timeouts and now - s.first >= self.after_seconds
            )

    def watched(self) -> list[Partition]:
        """The partitions with timeouts since their last delivered message, stuck or not."""
        with self._lock:
            return sorted(self._streaks)

    def forget(self) -> None:
        """Start over (the client was replaced: its successor has no history)."""
        with self._lock:
            self._streaks.clear()
