"""Bucket ownership across boxes (store/ownership.py): one read of the advisory locks per
rebalance tick serves every box, and each box is still split on its own."""

from __future__ import annotations

from {{ cookiecutter.package_name }}.container import Container
from outbox_engine.relay.worker import Worker

from ..support import (
    INBOX_BOX,
    OUTBOX_BOX,
    RecordingTransport,
    make_registry,
    running_worker,
    transport,
    wait_for,
)


def _split(first: Worker, second: Worker, box: str, buckets: int) -> bool:
    a = first.ownership.boxes[box].owned
    b = second.ownership.boxes[box].owned
    return not (a & b) and len(a | b) == buckets and abs(len(a) - len(b)) <= 1


async def test_two_workers_split_each_of_two_boxes_and_one_takes_both_back(
    container: Container,
) -> None:
    registry = make_registry(
        outbox={"transports": [transport(RecordingTransport, name="o")], "bucket_count": 16},
        inbox={"bucket_count": 7},
    )
    boxes = [OUTBOX_BOX, INBOX_BOX]
    sizes = {box: registry.get(box).config.bucket_count for box in boxes}
    assert sizes == {OUTBOX_BOX: 16, INBOX_BOX: 7}
    async with running_worker(container, registry, boxes) as first:

        async def first_owns_all() -> bool:
            return all(len(first.ownership.boxes[b].owned) == n for b, n in sizes.items())

        await wait_for(first_owns_all, within=10)
        async with running_worker(container, registry, boxes) as second:

            async def both_split() -> bool:
                return all(_split(first, second, b, n) for b, n in sizes.items())

            await wait_for(both_split, within=10)
            # 16 buckets: 8 + 8; 7 buckets: 4 + 3.
            assert sorted(len(w.ownership.boxes[OUTBOX_BOX].owned) for w in (first, second)) == [
                8,
                8,
            ]
            assert sorted(len(w.ownership.boxes[INBOX_BOX].owned) for w in (first, second)) == [
                3,
                4,
            ]
        await wait_for(first_owns_all, within=10)
