"""A box's lanes as a group (relay/lane_group.py): when asked to join, joined at a steady
rate, apart while a claim leaves a backlog, joined again once every lane's claim took
everything; apart always when not asked."""

from __future__ import annotations

from outbox_engine.relay.lane_group import LaneGroup


def _set(group: LaneGroup) -> list[int]:
    """The lanes whose wake-up is set (and clear them, as a lane does when it turns)."""
    woken = [lane for lane, flag in enumerate(group.flags) if flag.is_set()]
    for flag in group.flags:
        flag.clear()
    return woken


def test_joined_lane_0_claims_every_lane_and_the_others_none() -> None:
    group = LaneGroup(3, join=True)
    assert not group.split
    assert group.claims_for(0) == (0, 1, 2)
    assert group.claims_for(1) == ()
    assert group.claims_for(2) == ()


def test_joined_every_notify_wakes_lane_0_only() -> None:
    group = LaneGroup(2, join=True)
    group.wake({1})
    assert _set(group) == [0]
    group.wake(None)
    assert _set(group) == [0]


def test_a_joined_claim_with_more_behind_it_splits_and_wakes_the_others() -> None:
    group = LaneGroup(3, join=True)
    group.after(0, more=False)
    assert not group.split
    assert _set(group) == []
    group.after(0, more=True)
    assert group.split
    assert group.splits == 1
    assert _set(group) == [1, 2]  # lane 0 goes on by itself (`more`)
    assert [group.claims_for(lane) for lane in range(3)] == [(0,), (1,), (2,)]
    group.wake({2})
    assert _set(group) == [2]  # apart: a NOTIFY wakes the lanes of its buckets


def test_the_group_joins_only_once_every_lane_took_everything() -> None:
    group = LaneGroup(3, join=True)
    group.after(0, more=True)
    _set(group)
    group.after(1, more=False)
    group.after(0, more=False)
    assert group.split  # lane 2 has not claimed since the split
    group.after(2, more=True)
    group.after(0, more=True)  # lane 0's half filled up again
    group.after(2, more=False)
    assert group.split  # lane 0's last claim left more
    group.after(0, more=False)
    assert not group.split
    assert group.joins == 1
    assert group.claims_for(0) == (0, 1, 2)
    assert _set(group) == []  # joining wakes nobody: every lane's claim was whole


def test_a_claim_made_apart_that_ends_after_the_join_hands_over_to_lane_0() -> None:
    group = LaneGroup(2, join=True)
    group.after(0, more=True)
    group.after(1, more=False)
    group.after(0, more=False)
    assert not group.split
    _set(group)
    # Lane 1 was woken by a NOTIFY while apart and claimed its half; the claim was full.
    group.after(1, more=True)
    assert not group.split  # only lane 0's joined claim splits the group
    assert _set(group) == [0]
    # A lane that turns while joined hands what woke it to lane 0.
    group.joined_turn()
    assert _set(group) == [0]


def test_lanes_not_asked_to_join_and_a_single_lane_never_join() -> None:
    fixed = LaneGroup(2)
    assert fixed.split
    assert [fixed.claims_for(0), fixed.claims_for(1)] == [(0,), (1,)]
    for more in (True, False, True, False):
        fixed.after(0, more)
        fixed.after(1, more)
    assert fixed.split
    assert fixed.splits == fixed.joins == 0
    fixed.wake({1})
    assert _set(fixed) == [1]
    single = LaneGroup(1, join=True)
    assert single.split
    assert single.claims_for(0) == (0,)
    single.after(0, more=True)
    single.after(0, more=False)
    assert single.claims_for(0) == (0,)
    assert single.splits == 0
