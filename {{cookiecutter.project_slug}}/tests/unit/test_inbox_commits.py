"""The bookkeeping of inbox/commits.py: which partitions `settle` commits again, at which
offset, and which never. The client is a stand-in that records the commits handed to it
(tests/integration/test_inbox_commits.py has the broker refuse and go back for real)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from outbox_engine.inbox.commits import OffsetCommits
from outbox_engine.inbox.kafka_thread import ConsumerThread

REFUSED = KafkaError(KafkaError.OFFSET_METADATA_TOO_LARGE)


class Client:
    """What OffsetCommits calls on a Consumer: commit and assignment."""

    def __init__(self, assigned: list[tuple[str, int]]) -> None:
        self.assigned = assigned
        self.commits: list[list[tuple[str, int, int]]] = []

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> None:
        assert asynchronous
        self.commits.append(sorted((tp.topic, tp.partition, tp.offset) for tp in offsets))

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(topic, part) for topic, part in self.assigned]


@dataclass
class Answer:
    """A partition of librdkafka's answer to a commit (TopicPartition's `error` cannot be
    set from Python)."""

    topic: str
    partition: int
    offset: int
    error: KafkaError | None = None


def answer(topic: str, part: int, offset: int, error: KafkaError | None = None) -> TopicPartition:
    return cast(TopicPartition, Answer(topic, part, offset, error))


async def _settled(commits: OffsetCommits, client: Client) -> None:
    commits.settle(cast(Consumer, client))
    await commits.drain()


async def test_a_refused_commit_is_made_again_at_the_newest_offset() -> None:
    thread = ConsumerThread("test")
    commits = OffsetCommits(thread, lambda _error, _offsets: None)
    client = Client([("t", 0), ("t", 1)])
    try:
        for offset in (10, 20, 30):
            commits.send(cast(Consumer, client), [TopicPartition("t", 0, offset)])
        commits.send(cast(Consumer, client), [TopicPartition("t", 1, 5)])
        await commits.drain()
        # The broker refuses 20 (one partition of the answer), holds 10, 5; 30 unanswered.
        assert commits.confirm(None, [answer("t", 0, 10)]) == []
        problems = commits.confirm(None, [answer("t", 0, 20, REFUSED)])
        assert len(problems) == 1
        assert problems[0].startswith("t[0] refused: ")
        assert commits.confirm(None, [answer("t", 1, 5)]) == []
        await _settled(commits, client)
        assert client.commits[-1] == [("t", 0, 30)]  # the newest, the other partition held
        assert commits.resent == 1
        assert commits.sent == 5
        # Nothing unsettled now: settling again sends nothing.
        await _settled(commits, client)
        assert len(client.commits) == 5
    finally:
        thread.close()


async def test_an_answer_that_goes_back_is_settled_and_a_later_newest_one_clears_it() -> None:
    thread = ConsumerThread("test")
    commits = OffsetCommits(thread, lambda _error, _offsets: None)
    client = Client([("t", 0)])
    try:
        for offset in (1, 50):
            commits.send(cast(Consumer, client), [TopicPartition("t", 0, offset)])
        await commits.drain()
        assert commits.confirm(None, [answer("t", 0, 50)]) == []
        # A retried request for 1 lands after 50: the broker holds 1 now.
        assert commits.confirm(None, [answer("t", 0, 1)]) == ["t[0] went back from offset 50 to 1"]
        await _settled(commits, client)
        assert client.commits == [[("t", 0, 1)], [("t", 0, 50)], [("t", 0, 50)]]
        # The answer to the commit sent again is the newest: settled.
        assert commits.confirm(None, [answer("t", 0, 50)]) == []
        await _settled(commits, client)
        assert len(client.commits) == 3
        # A refusal followed by the newest offset held needs nothing either.
        commits.send(cast(Consumer, client), [TopicPartition("t", 0, 60)])
        commits.send(cast(Consumer, client), [TopicPartition("t", 0, 70)])
        await commits.drain()
        assert len(commits.confirm(None, [answer("t", 0, 60, REFUSED)])) == 1
        assert commits.confirm(None, [answer("t", 0, 70)]) == []
        await _settled(commits, client)
        assert len(client.commits) == 5
        assert commits.resent == 1
    finally:
        thread.close()


async def test_partitions_revoked_or_no_longer_assigned_are_never_committed_again() -> None:
    thread = ConsumerThread("test")
    commits = OffsetCommits(thread, lambda _error, _offsets: None)
    client = Client([("t", 0), ("t", 1), ("t", 2)])
    try:
        commits.send(
            cast(Consumer, client),
            [TopicPartition("t", 0, 7), TopicPartition("t", 1, 8), TopicPartition("t", 2, 9)],
        )
        await commits.drain()
        whole_refusal = KafkaError(KafkaError.REBALANCE_IN_PROGRESS)
        problems = commits.confirm(
            whole_refusal, [answer("t", 0, 7), answer("t", 1, 8), answer("t", 2, 9)]
        )
        assert len(problems) == 3
        commits.forget([TopicPartition("t", 0)])  # revoked (on_revoke)
        client.assigned = [("t", 2)]  # t[1] lost without a revoke seen
        await _settled(commits, client)
        assert client.commits[-1] == [("t", 2, 9)]
        # t[1] was dropped when found unassigned: assigned again, it is not sent again.
        client.assigned = [("t", 0), ("t", 1), ("t", 2)]
        assert len(commits.confirm(None, [answer("t", 1, 3, REFUSED)])) == 1
        await _settled(commits, client)
        assert len(client.commits) == 2
    finally:
        thread.close()


async def test_a_commit_the_client_refuses_at_once_is_settled_too() -> None:
    errors: list[KafkaError | None] = []

    class Refusing(Client):
        refuse = True

        def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> None:
            if self.refuse:
                self.refuse = False
                raise KafkaException(KafkaError(KafkaError._NO_OFFSET))
            super().commit(offsets, asynchronous)

    thread = ConsumerThread("test")
    commits = OffsetCommits(thread, lambda error, _offsets: errors.append(error))
    client = Refusing([("t", 0)])
    try:
        commits.send(cast(Consumer, client), [TopicPartition("t", 0, 4)])
        await commits.drain()
        assert [e.code() if e else None for e in errors] == [KafkaError._NO_OFFSET]
        await _settled(commits, client)
        assert client.commits == [[("t", 0, 4)]]
    finally:
        thread.close()


async def test_a_batch_stored_after_its_partition_was_revoked_commits_only_what_is_held() -> None:
    """A rebalance took t[0] while a batch of t[0] and t[1] was stored: its commit goes out
    for t[1] alone (an old t[0] offset would set the new owner's back)."""
    thread = ConsumerThread("test")
    commits = OffsetCommits(thread, lambda _error, _offsets: None)
    client = Client([("t", 0), ("t", 1)])
    try:
        commits.send(cast(Consumer, client), [TopicPartition("t", 0, 5)])
        await commits.drain()
        commits.forget([TopicPartition("t", 0)])  # on_revoke, inside the fetch
        client.assigned = [("t", 1)]
        commits.send(
            cast(Consumer, client), [TopicPartition("t", 0, 10), TopicPartition("t", 1, 7)]
        )
        commits.send(cast(Consumer, client), [TopicPartition("t", 0, 12)])  # nothing held
        await commits.drain()
        assert client.commits == [[("t", 0, 5)], [("t", 1, 7)]]
        assert (commits.sent, commits.withheld) == (2, 2)
        # Nothing of t[0] is left to settle, even after an answer that went wrong.
        commits.confirm(None, [answer("t", 0, 10, REFUSED)])
        await _settled(commits, client)
        assert client.commits == [[("t", 0, 5)], [("t", 1, 7)]]
    finally:
        thread.close()


async def test_a_commit_whose_assignment_cannot_be_read_is_made_when_settling() -> None:
    class Unreadable(Client):
        broken = True

        def assignment(self) -> list[TopicPartition]:
            if self.broken:
                raise KafkaException(KafkaError(KafkaError._STATE))
            return super().assignment()

    thread = ConsumerThread("test")
    commits = OffsetCommits(thread, lambda _error, _offsets: None)
    client = Unreadable([("t", 0)])
    try:
        commits.send(cast(Consumer, client), [TopicPartition("t", 0, 4)])
        await commits.drain()
        assert (client.commits, commits.sent) == ([], 0)
        client.broken = False
        await _settled(commits, client)
        assert client.commits == [[("t", 0, 4)]]
        assert commits.resent == 1
    finally:
        thread.close()
