"""Which peers a node reports unreached: those that answered none of its probes for
`after_ms`, a peer first seen (or seen at a new address) given that much grace, and a
channel whose probe failed dialled anew. Fake clients, the clock injected."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from zonegate.broker.peer_probes import PeerProbes
from zonegate.metastore.models import NodeRecord
from zonegate.router.membership import Membership

pytestmark = pytest.mark.unit

AFTER_MS = 1500


class FakeClient:
    def __init__(self, peers: FakePeers, target: str) -> None:
        self.peers, self.target, self.closed = peers, target, False

    async def probe(self) -> str | None:
        return None if self.target in self.peers.answering else "DEADLINE_EXCEEDED"

    async def close(self) -> None:
        self.closed = True


class FakePeers:
    """LeaderPeers' two calls the probes make."""

    def __init__(self) -> None:
        self.answering: set[str] = set()
        self.made: list[FakeClient] = []

    def target(self, rec: NodeRecord) -> str:
        return f"{rec.rpc_host}:{rec.rpc_port}"

    def probe_client(self, rec: NodeRecord, deadline_s: float, loop: Any) -> FakeClient:
        assert deadline_s == 0.5
        client = FakeClient(self, self.target(rec))
        self.made.append(client)
        return client


def test_peers_unanswered_for_a_while_are_reported_and_a_failed_channel_is_redialled() -> None:
    now = 1_800_000_000_000

    def node(node_id: int, port: int = 9093) -> NodeRecord:
        return NodeRecord(node_id, "z", "h", 9092, f"n{node_id}", port, lease_expires_ms=now + 6000)

    members = Membership(None, node(1), lease_ms=6000, clock_ms=lambda: now)  # type: ignore[arg-type]
    members._view = ([node(1), node(2), node(3)], {})
    peers = FakePeers()
    peers.answering = {"n2:9093"}
    probes = PeerProbes(members, peers, None, after_ms=AFTER_MS, clock_ms=lambda: now)  # type: ignore[arg-type]

    async def run() -> None:
        nonlocal now
        await probes.probe_all()
        assert probes.unreached() == (), "node 3 first seen: grace"
        now += AFTER_MS
        await probes.probe_all()
        assert probes.unreached() == (3,)
        # Each failed probe dropped its channel: a new one per probe of node 3.
        assert sum(1 for c in peers.made if c.target == "n3:9093") == 2
        assert all(c.closed for c in peers.made if c.target == "n3:9093")
        assert sum(1 for c in peers.made if c.target == "n2:9093") == 1
        peers.answering.add("n3:9093")
        await probes.probe_all()
        assert probes.unreached() == ()
        # Node 2 comes back at a new port and stops answering: grace again from then.
        peers.answering = {"n3:9093"}
        members._view = ([node(1), node(2, 9999), node(3)], {})
        await probes.probe_all()
        assert probes.unreached() == ()
        now += AFTER_MS
        await probes.probe_all()
        assert probes.unreached() == (2,)
        # A node no longer live is forgotten.
        members._view = ([node(1), replace(node(2), lease_expires_ms=0), node(3)], {})
        await probes.probe_all()
        assert probes.unreached() == ()
        await probes.close()

    asyncio.run(run())
