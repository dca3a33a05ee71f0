"""The order in which the systems run, per repeat.

Whoever runs first after the backlog fill (or after another system's run) inherits what
it left behind: dirty pages to checkpoint, autovacuum work, a cold cache. A fixed order
puts that on the same system every repeat and turns it into a bias of the ratios. So the
order is a seeded shuffle, rotated by one place per repeat: with n systems, every system
takes every position once in n repeats, and two consecutive repeats never share an order.
The seed is printed and recorded; `--seed N` replays the same orders.
"""

from __future__ import annotations

import random


def new_seed() -> int:
    """A fresh seed for a run that was given none (printed, so the run can be replayed)."""
    return random.SystemRandom().randrange(1, 1_000_000)


def repeat_orders(names: list[str], repeats: int, seed: int) -> list[list[str]]:
    """The system order of each repeat: `names` shuffled with `seed`, rotated by `repeat`."""
    if len(set(names)) != len(names):
        raise ValueError(f"system names must be distinct: {names}")
    base = list(names)
    random.Random(seed).shuffle(base)
    count = len(base)
    if count == 0:
        return [[] for _ in range(repeats)]
    return [base[r % count :] + base[: r % count] for r in range(repeats)]
