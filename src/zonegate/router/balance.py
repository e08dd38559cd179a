"""Leadership balance: which partitions to move so leaders spread evenly over zones and nodes.

Kafka's controller, with `auto.leader.rebalance.enable`, moves each partition
back to its preferred leader (the first of its replicas) when a broker's share
of partitions led elsewhere passes `leader.imbalance.per.broker.percentage`.
zonegate does the same (`preferred_back`), and one thing more, because a
partition's replica is only where it was placed: a topic created while one node
was up has every partition preferring that node, and Kafka's rule alone would
keep them there for ever. So `spread` then reassigns partitions (their preferred
node moves with their leader) from nodes leading more than their share to nodes
leading less: shares even across the zones with a live node first, then across
a zone's nodes, as placement does (placement.py). The same threshold guards
both, so a near-even cluster is left alone rather than churned.

Pure functions over the controller's read of the store, so every case is a unit
test; the controller executes the moves (broker/controller.py).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from zonegate.metastore.models import NodeRecord, PartitionInfo

# Reassignments one check makes at most, so a pass stays short on the thread that
# renews leases (broker/lease_keeper.py) and producers meet a bounded burst of
# moves; a larger imbalance takes several checks.
MAX_SPREAD_MOVES = 1000


@dataclass(frozen=True, slots=True)
class LeaderMove:
    stream_id: int
    node: int
    # True: the node becomes the partition's preferred leader too (a reassignment);
    # False: the partition goes back to the preferred leader it has.
    reassign: bool


def rebalance(
    partitions: Sequence[PartitionInfo], live: Sequence[NodeRecord], imbalance_pct: float
) -> list[LeaderMove]:
    """The moves that bring leadership back to balance; none when within the threshold.

    Partitions whose leader is not live are the failover's (the controller moves
    them first) and are left out."""
    live_ids = {n.node_id for n in live}
    led = [p for p in partitions if p.leader_node in live_ids]
    moves = preferred_back(led, live_ids, imbalance_pct)
    leader = {p.stream_id: p.leader_node for p in led}
    for m in moves:
        leader[m.stream_id] = m.node
    now = [replace(p, leader_node=leader[p.stream_id]) for p in led]
    spread_moves = spread(now, live, imbalance_pct)
    # A partition sent home and then spread elsewhere takes the one move (a reassignment).
    respread = {s.stream_id for s in spread_moves}
    return [m for m in moves if m.stream_id not in respread] + spread_moves


def preferred_back(
    led: Sequence[PartitionInfo], live_ids: set[int], imbalance_pct: float
) -> list[LeaderMove]:
    """Kafka's rule: a live node whose preferred partitions are led elsewhere, more than
    the threshold of them, leads them again."""
    by_pref: dict[int, list[PartitionInfo]] = defaultdict(list)
    for p in led:
        if p.preferred in live_ids:
            by_pref[p.preferred].append(p)
    out: list[LeaderMove] = []
    for node, mine in sorted(by_pref.items()):
        away = [p for p in mine if p.leader_node != node]
        if away and len(away) / len(mine) > imbalance_pct / 100:
            out.extend(LeaderMove(p.stream_id, node, reassign=False) for p in away)
    return out


def shares(total: int, live: Sequence[NodeRecord], load: Counter[int]) -> dict[int, int]:
    """How many partitions each live node should lead: even over zones, then over a
    zone's nodes; a remainder goes to those leading most now (fewest moves)."""
    zones: dict[str, list[int]] = defaultdict(list)
    for n in live:
        zones[n.zone].append(n.node_id)
    zone_load = {z: sum(load[i] for i in ids) for z, ids in zones.items()}
    out: dict[int, int] = {}
    for z, zone_total in _split(total, zone_load).items():
        out.update(_split(zone_total, {i: load[i] for i in zones[z]}))
    return out


K = TypeVar("K", str, int)


def _split(total: int, load: dict[K, int]) -> dict[K, int]:
    base, extra = divmod(total, len(load))
    ranked = sorted(load, key=lambda k: (-load[k], k))
    return {k: base + (1 if i < extra else 0) for i, k in enumerate(ranked)}


def spread(
    led: Sequence[PartitionInfo],
    live: Sequence[NodeRecord],
    imbalance_pct: float,
    max_moves: int = MAX_SPREAD_MOVES,
) -> list[LeaderMove]:
    """Reassignments from nodes over their share to nodes under it, when some node is
    off its share by more than the threshold. Only partitions led by their preferred
    node move (one led elsewhere waits for its preferred node, as in Kafka); from a
    node, the partition of the topic it leads most of, to the node leading least of it.
    At most `max_moves` a pass: the rest follow at the next check."""
    if not live or not led:
        return []
    load: Counter[int] = Counter({n.node_id: 0 for n in live})
    for p in led:
        load[p.leader_node] += 1
    target = shares(len(led), live, load)
    if not any(
        abs(load[n] - target[n]) > max(target[n], 1) * imbalance_pct / 100
        and abs(load[n] - target[n]) >= 1
        for n in target
    ):
        return []
    topic_on: Counter[tuple[str, int]] = Counter((p.topic, p.leader_node) for p in led)
    movable = {n: _Movable() for n in target}
    for p in sorted(led, key=lambda p: -p.stream_id):
        if p.preferred == p.leader_node and p.leader_node in movable:
            movable[p.leader_node].add(p)
    out: list[LeaderMove] = []
    while len(out) < max_moves:
        over = [n for n in target if load[n] > target[n] and movable[n].count]
        under = [n for n in target if load[n] < target[n]]
        if not over or not under:
            break
        src = max(over, key=lambda n: (load[n] - target[n], -n))
        dst = min(under, key=lambda n: (load[n] - target[n], n))
        p = movable[src].take(topic_on, dst)
        load[src] -= 1
        load[dst] += 1
        topic_on[(p.topic, src)] -= 1
        topic_on[(p.topic, dst)] += 1
        out.append(LeaderMove(p.stream_id, dst, reassign=True))
    return out


class _Movable:
    """One node's movable partitions by topic, and its topics by how many they have
    there, so that picking the topic to move from scans a few topics, not them all."""

    def __init__(self) -> None:
        self.count = 0
        self._by_topic: dict[str, list[PartitionInfo]] = {}
        self._by_size: dict[int, dict[str, None]] = defaultdict(dict)

    def add(self, p: PartitionInfo) -> None:
        """Partitions are added in descending stream id order (taken from the end)."""
        parts = self._by_topic.setdefault(p.topic, [])
        if parts:
            self._unlist(len(parts), p.topic)
        parts.append(p)
        self._by_size[len(parts)][p.topic] = None
        self.count += 1

    def take(self, topic_on: Counter[tuple[str, int]], dst: int) -> PartitionInfo:
        """A partition of the topic with most here and least on node `dst`: the most
        here minus `topic_on[(topic, dst)]`, found by looking at the topics with most here
        first and stopping once no topic with fewer could score more."""
        best: tuple[int, str] | None = None
        for size in sorted(self._by_size, reverse=True):
            if best is not None and size <= best[0]:
                break
            for topic in self._by_size[size]:
                score = size - topic_on[(topic, dst)]
                if best is None or score > best[0]:
                    best = (score, topic)
                    if score == size:
                        break
        assert best is not None
        topic = best[1]
        parts = self._by_topic[topic]
        self._unlist(len(parts), topic)
        p = parts.pop()
        if parts:
            self._by_size[len(parts)][topic] = None
        else:
            del self._by_topic[topic]
        self.count -= 1
        return p

    def _unlist(self, size: int, topic: str) -> None:
        bucket = self._by_size[size]
        del bucket[topic]
        if not bucket:
            del self._by_size[size]
