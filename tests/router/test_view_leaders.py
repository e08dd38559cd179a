"""Leaders of many partitions at once (one Metadata answer): the same as one at a time."""

from __future__ import annotations

import uuid

import pytest

from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.router.rendezvous import choose_node
from zonegate.router.view import ClusterView

pytestmark = pytest.mark.unit

_T = uuid.UUID(int=1)


def _node(node_id: int, zone: str) -> NodeRecord:
    return NodeRecord(node_id, zone, "h", 9092, "h", 9093)


def _parts(n: int) -> list[PartitionInfo]:
    return [PartitionInfo(_T, "t", i, i + 1, 7, 0) for i in range(n)]


def test_leaders_match_leader_for_and_read_the_nodes_once() -> None:
    nodes = [_node(1, "a"), _node(2, "a"), _node(3, "b"), _node(7, "c")]
    reads = 0

    def live() -> list[NodeRecord]:
        nonlocal reads
        reads += 1
        return nodes

    view = ClusterView(live)
    parts = _parts(200)
    for zone in ("a", "b", "nowhere"):
        expected = [view.leader_for(p, zone) for p in parts]
        reads = 0
        leader_of = view.leaders(zone)
        assert [leader_of(p) for p in parts] == expected
        assert reads <= 2  # the zone's nodes (and the live ids when it has none): once
    assert {view.leaders("a")(p) for p in parts} == {1, 2}
    assert {view.leaders("b")(p) for p in parts} == {3}
    assert {view.leaders("nowhere")(p) for p in parts} == {7}  # the real leader: live


def test_one_node_is_chosen_without_hashing_and_as_hashing_would() -> None:
    assert choose_node("t", 5, [4]) == 4
    with pytest.raises(ValueError):
        choose_node("t", 5, [])
