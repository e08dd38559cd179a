"""Leadership balance: preferred leaders back home, then an even spread per zone and node."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence

import pytest

from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.router.balance import LeaderMove, rebalance, shares

pytestmark = pytest.mark.unit
TID = uuid.UUID(int=1)


def _nodes(spec: dict[int, str]) -> list[NodeRecord]:
    return [NodeRecord(n, z, "h", 1, "h", 2) for n, z in spec.items()]


def _parts(*layout: tuple[str, int, int]) -> list[PartitionInfo]:
    """(topic, leader, preferred) per partition, stream ids from 1."""
    seen: Counter[str] = Counter()
    out = []
    for sid, (topic, leader, preferred) in enumerate(layout, start=1):
        out.append(PartitionInfo(TID, topic, seen[topic], sid, leader, 0, preferred))
        seen[topic] += 1
    return out


def _after(parts: Sequence[PartitionInfo], moves: Sequence[LeaderMove]) -> dict[int, int]:
    leader = {p.stream_id: p.leader_node for p in parts}
    for m in moves:
        leader[m.stream_id] = m.node
    return leader


def test_topic_made_while_one_node_was_up_spreads_over_the_zones() -> None:
    # The start order: six partitions all on node 1, then zones b and c join.
    parts = _parts(*[("t", 1, 1)] * 6)
    live = _nodes({1: "a", 2: "b", 3: "c"})
    moves = rebalance(parts, live, 10)
    assert len(moves) == 4 and all(m.reassign for m in moves)
    assert Counter(_after(parts, moves).values()) == {1: 2, 2: 2, 3: 2}
    # Balanced now: the next pass moves nothing.
    done = [
        PartitionInfo(TID, p.topic, p.partition, p.stream_id, n, 1, n)
        for p, n in zip(parts, _after(parts, moves).values(), strict=True)
    ]
    assert rebalance(done, live, 10) == []


def test_even_over_zones_first_then_over_a_zones_nodes() -> None:
    parts = _parts(*[("t", 1, 1)] * 12)
    live = _nodes({1: "a", 2: "a", 3: "b", 4: "c"})
    leaders = _after(parts, rebalance(parts, live, 10))
    zone = {1: "a", 2: "a", 3: "b", 4: "c"}
    assert Counter(zone[n] for n in leaders.values()) == {"a": 4, "b": 4, "c": 4}
    assert Counter(leaders.values()) == {1: 2, 2: 2, 3: 4, 4: 4}


def test_a_node_back_after_failover_leads_its_preferred_partitions_again() -> None:
    # Node 3 was away: its partitions failed over to 1 and 2, keeping 3 as preferred.
    parts = _parts(("t", 1, 1), ("t", 2, 2), ("t", 1, 3), ("t", 2, 3))
    live = _nodes({1: "a", 2: "b", 3: "c"})
    moves = rebalance(parts, live, 10)
    assert sorted((m.stream_id, m.node, m.reassign) for m in moves) == [
        (3, 3, False),
        (4, 3, False),
    ]


def test_within_the_threshold_nothing_moves() -> None:
    # 34/33/33 of 100 is even; 36/32/32 is off by 2 of 33: 6 %, under 10 %.
    live = _nodes({1: "a", 2: "b", 3: "c"})
    parts = _parts(*[("t", 1, 1)] * 36, *[("t", 2, 2)] * 32, *[("t", 3, 3)] * 32)
    assert rebalance(parts, live, 10) == []
    # 10 % of preferred partitions led elsewhere is not more than 10 %: left alone too.
    away = _parts(*[("t", 1, 1)] * 9, ("t", 2, 1), *[("t", 2, 2)] * 9, *[("t", 3, 3)] * 11)
    assert rebalance(away, live, 10) == []
    # At 0 % every difference counts.
    assert len(rebalance(parts, live, 0)) == 2


def test_partitions_of_a_dead_leader_or_away_from_a_dead_preferred_stay() -> None:
    live = _nodes({1: "a", 2: "b"})
    # Stream 1 is led by dead node 9 (the failover's job); 2 and 3 wait for node 3.
    parts = _parts(("t", 9, 9), ("t", 1, 3), ("t", 1, 3), ("t", 1, 1), ("t", 2, 2))
    moves = rebalance(parts, live, 10)
    assert {m.stream_id for m in moves} <= {4}
    assert all(m.stream_id not in (1, 2, 3) for m in moves)


def test_moves_spread_each_topic_too() -> None:
    # Two topics, each all on node 1: each ends spread, not one topic per node.
    parts = _parts(*[("a", 1, 1)] * 3, *[("b", 1, 1)] * 3)
    live = _nodes({1: "a", 2: "b", 3: "c"})
    leaders = _after(parts, rebalance(parts, live, 10))
    for topic in ("a", "b"):
        nodes = {leaders[p.stream_id] for p in parts if p.topic == topic}
        assert nodes == {1, 2, 3}


def test_shares_give_a_remainder_to_those_leading_most() -> None:
    live = _nodes({1: "a", 2: "b", 3: "c"})
    assert shares(7, live, Counter({2: 5, 1: 2})) == {2: 3, 1: 2, 3: 2}
    assert shares(0, live, Counter()) == {1: 0, 2: 0, 3: 0}


def test_no_live_node_or_no_partition_moves_nothing() -> None:
    assert rebalance(_parts(("t", 1, 1)), [], 10) == []
    assert rebalance([], _nodes({1: "a"}), 10) == []


def test_a_large_imbalance_takes_several_checks_of_bounded_moves() -> None:
    live = _nodes({1: "a", 2: "b", 3: "c"})
    parts = _parts(*[(f"t{i % 7}", 1, 1) for i in range(3000)])
    passes = 0
    while moves := rebalance(parts, live, 10):
        assert len(moves) <= 1000
        leader = _after(parts, moves)
        parts = [
            PartitionInfo(
                TID, p.topic, p.partition, p.stream_id, leader[p.stream_id], 1, leader[p.stream_id]
            )
            for p in parts
        ]
        passes += 1
    assert passes == 2
    assert Counter(p.leader_node for p in parts) == {1: 1000, 2: 1000, 3: 1000}
    for topic in {p.topic for p in parts}:  # each topic spread too
        per_node = Counter(p.leader_node for p in parts if p.topic == topic)
        assert max(per_node.values()) - min(per_node.values()) <= 1
