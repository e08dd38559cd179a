"""Which nodes the controller holds cut off from the other zones' nodes, from the peers
each node reports unreached, with its holds against a flapping link (times explicit,
as a ManualClock moves them)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from zonegate.metastore.models import NodeRecord
from zonegate.router.reachability import CutOffs, cut_off_now

pytestmark = pytest.mark.unit

LEASE_MS = 6000


class Clock:
    """Wall time that moves only when the test says (CutOffs takes the time per call)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def wall_ms(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


ZONES = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def _rows(
    now: int, unreached: dict[int, set[int]], cut_off: dict[int, int] | None = None
) -> list[NodeRecord]:
    """Six live nodes, two per zone, each reporting the peers it has not reached."""
    return [
        NodeRecord(
            n,
            z,
            "h",
            9092,
            "h",
            9093,
            lease_expires_ms=now + LEASE_MS,
            unreached=tuple(sorted(unreached.get(n, set()))),
            cut_off_ms=(cut_off or {}).get(n, 0),
        )
        for n, z in ZONES.items()
    ]


# Zone c cut off from zones a and b, both ways; its own two nodes still reach each other.
CUT_C = {1: {5, 6}, 2: {5, 6}, 3: {5, 6}, 4: {5, 6}, 5: {1, 2, 3, 4}, 6: {1, 2, 3, 4}}


def test_a_zone_cut_off_from_the_others_is_named_and_only_it() -> None:
    assert cut_off_now(_rows(0, CUT_C), 0) == {5, 6}
    assert cut_off_now(_rows(0, {}), 0) == set()


def test_a_node_the_others_cannot_reach_but_that_reaches_them_is_not_cut_off() -> None:
    """Its serving loop busy: its peers' probes time out, its own (from its lease keeper's
    thread) answer. It keeps its partitions."""
    slow = {1: {5}, 2: {5}, 3: {5}, 4: {5}, 6: {5}}
    assert cut_off_now(_rows(0, slow), 0) == set()


def test_one_node_alone_cut_off_from_everyone_is_named() -> None:
    alone = {n: {5} for n in (1, 2, 3, 4, 6)} | {5: {1, 2, 3, 4, 6}}
    assert cut_off_now(_rows(0, alone), 0) == {5}


def test_half_of_the_other_zones_is_not_a_majority() -> None:
    """Zone a cut from zone c only: node 1's other-zone peers are 3, 4 (reached) and 5, 6
    (not): two of four, not more than half; nobody is named."""
    a_c = {1: {5, 6}, 2: {5, 6}, 5: {1, 2}, 6: {1, 2}}
    assert cut_off_now(_rows(0, a_c), 0) == set()


def test_a_cluster_split_in_two_halves_moves_nothing() -> None:
    """Two zones that cannot reach each other: each names the other, no side is a
    majority of zones, so no node is named (commits stay fenced by epoch)."""
    two = {1: "a", 2: "a", 3: "b", 4: "b"}
    rows = [
        NodeRecord(n, z, "h", 1, "h", 2, lease_expires_ms=LEASE_MS, unreached=peers)
        for (n, z), peers in zip(two.items(), [(3, 4), (3, 4), (1, 2), (1, 2)], strict=True)
    ]
    assert cut_off_now(rows, 0) == set()


def test_dead_nodes_and_their_reports_do_not_count() -> None:
    rows = _rows(0, CUT_C)
    rows = [replace(r, lease_expires_ms=0) if r.node_id in (3, 4) else r for r in rows]
    # Zones a and c left: c cannot reach a, a cannot reach c; neither is a majority.
    assert cut_off_now(rows, 0) == set()


def test_held_after_a_quarter_lease_released_after_a_whole_lease_reachable() -> None:
    clock = Clock()
    cuts = CutOffs(LEASE_MS // 4, LEASE_MS)
    t0 = clock.wall_ms()
    assert not cuts.judge(_rows(t0, CUT_C), t0).cut_off  # first seen: held only later
    clock.advance(1.0)
    now = clock.wall_ms()
    assert not cuts.judge(_rows(now, CUT_C), now).cut_off
    clock.advance(0.5)
    now = clock.wall_ms()
    judged = cuts.judge(_rows(now, CUT_C), now)
    assert judged.cut_off == {5, 6} and not judged.released
    held = {5: now, 6: now}
    # Still cut: held already, nothing new to write.
    clock.advance(0.5)
    now = clock.wall_ms()
    judged = cuts.judge(_rows(now, CUT_C, held), now)
    assert not judged.cut_off and not judged.released
    # The link heals: reachable for less than a lease, still held.
    healed_at = clock.wall_ms()
    clock.advance(5.5)
    now = clock.wall_ms()
    assert not cuts.judge(_rows(healed_at, {}, held), healed_at).released
    assert not cuts.judge(_rows(now, {}, held), now).released
    clock.advance(0.5)
    now = clock.wall_ms()
    judged = cuts.judge(_rows(now, {}, held), now)
    assert judged.released == {5, 6} and not judged.cut_off


def test_a_flapping_link_neither_moves_partitions_nor_brings_them_back_each_time() -> None:
    """Cut 1 s, healed 1 s, again and again: never cut a quarter lease on end, so never
    held; once held (a longer cut), never reachable a lease on end, so never released."""
    clock = Clock()
    cuts = CutOffs(LEASE_MS // 4, LEASE_MS)
    for _ in range(10):
        for rows in (CUT_C, {}):
            for _ in range(4):  # a pass every 250 ms
                now = clock.wall_ms()
                judged = cuts.judge(_rows(now, rows), now)
                assert not judged.cut_off and not judged.released
                clock.advance(0.25)
    now = clock.wall_ms()
    cuts.judge(_rows(now, CUT_C), now)
    clock.advance(LEASE_MS / 4000)
    now = clock.wall_ms()
    assert cuts.judge(_rows(now, CUT_C), now).cut_off == {5, 6}
    held = {5: now, 6: now}
    for _ in range(10):
        for rows in ({}, CUT_C):
            for _ in range(8):
                now = clock.wall_ms()
                judged = cuts.judge(_rows(now, rows, held), now)
                assert not judged.cut_off and not judged.released
                clock.advance(0.25)


def test_a_new_controller_waits_the_hold_again() -> None:
    """The controller's memory is its own: one taking over a cut in progress holds a node
    only after a quarter lease of its own passes."""
    now = 1_800_000_000_000
    first = CutOffs(LEASE_MS // 4, LEASE_MS)
    first.judge(_rows(now, CUT_C), now)
    later = now + LEASE_MS // 4
    assert first.judge(_rows(later, CUT_C), later).cut_off == {5, 6}
    second = CutOffs(LEASE_MS // 4, LEASE_MS)
    assert not second.judge(_rows(later, CUT_C), later).cut_off
