"""The leader-RPC clients to other nodes, and the usage records of leader RPCs both ways."""

from __future__ import annotations

import asyncio

import pytest

from zonegate.leader_forwarder.peers import LeaderPeers, dial_address
from zonegate.metastore.models import NodeRecord
from zonegate.usage.accounting import FORWARD_RPC, Accounting, Counts, TrafficKey

pytestmark = pytest.mark.unit


class Nodes:
    def __init__(self) -> None:
        self.records = {2: NodeRecord(2, "zone-b", "h", 9092, "10.0.0.2", 9300)}

    def node(self, node_id: int) -> NodeRecord | None:
        return self.records.get(node_id)

    def zone_of(self, node_id: int) -> str:
        rec = self.records.get(node_id)
        return rec.zone if rec is not None else ""


def _forward(peer_zone: str, leader_zone: str) -> TrafficKey:
    return TrafficKey(FORWARD_RPC, "", peer_zone, leader_zone, "", "")


def test_one_client_per_node_made_again_when_the_node_moves() -> None:
    async def run() -> None:
        nodes, accounting = Nodes(), Accounting(1, "zone-a")
        peers = LeaderPeers(1, "zone-a", nodes, accounting)
        assert peers.client(3) is None  # unknown
        first = peers.client(2)
        assert first is not None and first.target == "10.0.0.2:9300"
        assert peers.client(2) is first
        nodes.records[2] = NodeRecord(2, "zone-b", "h", 9092, "10.0.0.2", 9301)
        second = peers.client(2)
        assert second is not None and second is not first
        assert second.target == "10.0.0.2:9301"
        await peers.close()

    asyncio.run(run())


def test_a_node_in_the_dial_map_is_dialled_at_the_mapped_address() -> None:
    async def run() -> None:
        nodes = Nodes()
        nodes.records[3] = NodeRecord(3, "zone-c", "h", 9092, "10.0.0.3", 9300)
        dial = {"10.0.0.2:9300": "127.0.0.1:19300"}
        peers = LeaderPeers(1, "zone-a", nodes, Accounting(1, "zone-a"), dial)
        mapped, plain = peers.client(2), peers.client(3)
        assert mapped is not None and mapped.target == "127.0.0.1:19300"
        assert plain is not None and plain.target == "10.0.0.3:9300"
        assert peers.client(2) is mapped  # the mapped target is the node's, not a move
        assert dial_address(nodes.records[2], dial) == ("127.0.0.1", 19300)
        await peers.close()

    asyncio.run(run())


def test_calls_both_ways_are_counted_against_the_other_nodes_zone() -> None:
    async def run() -> None:
        accounting = Accounting(1, "zone-a")
        peers = LeaderPeers(1, "zone-a", Nodes(), accounting)
        client = peers.client(2)
        assert client is not None and client._bytes_hook is not None
        client._bytes_hook(100, 40)  # what the client calls after each RPC
        peers.served(2, 70, 20)
        peers.served(-1, 5, 5)  # a caller that gave no node id
        assert accounting.drain_interval() == {
            _forward("zone-b", "zone-b"): Counts(40, 100, 1),
            _forward("zone-b", "zone-a"): Counts(70, 20, 1),
            _forward("", "zone-a"): Counts(5, 5, 1),
        }
        await peers.close()

    asyncio.run(run())
