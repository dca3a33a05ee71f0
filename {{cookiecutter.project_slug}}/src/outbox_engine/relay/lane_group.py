"""A box's lanes as a group: whether they claim apart or lane 0 claims for all of them.

Lane i of a box works the owned buckets b with b % concurrency == i. Apart, each lane
claims, delivers and marks its own half: while one lane waits for Kafka's delivery reports,
another claims. That overlap is what a backlog drains on (one worker: 25,557 msgs/s with
two lanes against 19,949 with one, bench/notes.md). At a steady rate it only costs: a
transaction of ten items spread over both halves wakes both lanes, and each makes its own
claim, produce and mark, so the worker makes ~1.6 claims a transaction where one lane makes
one, and the p99 commit-to-delivery at 2,000 items/s follows that CPU.

With `join` (the worker's `--join-lanes`) the lanes of a box start joined: lane 0 claims
every owned bucket (holding every lane's lock, taken in lane order, so each bucket is still
in one batch at a time) and the other lanes sleep. When a joined claim comes back with more
behind it (`BatchReport.more`: a full batch, a bucket at its share, items deferred), the
group splits and wakes the other lanes, which claim their own buckets from then on. It
joins again once every lane's last claim took everything claimable. A NOTIFY goes to the
lanes of its buckets while split, to lane 0 while joined (`wake`). A lane that finds the
group joined when it turns hands what woke it to lane 0 (its claim may have been cut short
by the join, or a NOTIFY came for it just before) and sleeps until the group splits again
or its fallback wait ends, so it still turns for the liveness probe.

Joining is not the default, because it has a price: joined, a transaction that commits
while lane 0's batch waits for Kafka's delivery reports waits for that batch to end, where
a lane apart (half the time, the other lane's half) would have claimed it at once. Where a
batch's cycle is as long as the time between two commits (a slow host, a broker far away),
that queueing costs more latency than the saved CPU gains (bench/notes.md has the runs).
Without `join`, and with one lane, the group is always apart.
"""

from __future__ import annotations

from outbox_engine.relay.pacing import Flag


class LaneGroup:
    """The wake-up flags of a box's lanes and whether they claim apart."""

    def __init__(self, concurrency: int, join: bool = False) -> None:
        self.flags = [Flag() for _ in range(concurrency)]
        self.adaptive = concurrency > 1 and join
        # Apart from the start when the group never joins.
        self.split = not self.adaptive
        self._busy: set[int] = set()  # lanes whose last claim left more behind (while split)
        self.splits = 0  # times the group split since the worker started
        self.joins = 0  # times it joined again

    @property
    def size(self) -> int:
        return len(self.flags)

    def claims_for(self, lane: int) -> tuple[int, ...]:
        """The lanes whose buckets `lane` claims now: its own while split, every lane's for
        lane 0 while joined, none for the others while joined."""
        if self.split:
            return (lane,)
        return tuple(range(self.size)) if lane == 0 else ()

    def wake(self, lanes: set[int] | None) -> None:
        """A NOTIFY for the buckets of `lanes` (None: every lane) arrived."""
        if not self.split:
            self.flags[0].set()
            return
        for lane, flag in enumerate(self.flags):
            if lanes is None or lane in lanes:
                flag.set()

    def wake_all(self) -> None:
        for flag in self.flags:
            flag.set()

    def joined_turn(self) -> None:
        """A lane other than 0 turned while the group is joined: lane 0 claims for it."""
        self.flags[0].set()

    def after(self, lane: int, more: bool) -> None:
        """Lane `lane`'s claim came back, with `more` claimable items behind it or not."""
        if not self.adaptive:
            return
        if not self.split:
            if not more:
                return
            if lane == 0:
                self.split = True
                self.splits += 1
                self._busy = set(range(self.size))
                for flag in self.flags[1:]:
                    flag.set()
            else:
                # A claim the lane made apart, before the group joined: lane 0 goes on.
                self.flags[0].set()
            return
        if more:
            self._busy.add(lane)
            return
        self._busy.discard(lane)
        if not self._busy:
            self.split = False
            self.joins += 1
