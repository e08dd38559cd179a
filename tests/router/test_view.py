"""What clients of each zone are told when a zone's nodes fall silent: a zone all of
whose nodes stopped renewing for a quarter of a lease counts as having no node, so its
clients asking another zone are told of the answering nodes and the real leaders."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.router.membership import Membership
from zonegate.router.view import ClusterView

pytestmark = pytest.mark.unit

LEASE = 6000
ZONES = {1: "zone-a", 2: "zone-a", 3: "zone-b", 5: "zone-c", 6: "zone-c"}


def _rec(node_id: int) -> NodeRecord:
    zone = ZONES[node_id]
    return NodeRecord(node_id, zone, "127.0.0.1", 9000 + node_id, "127.0.0.1", 9100 + node_id)


def _part(leader: int) -> PartitionInfo:
    return PartitionInfo(uuid.uuid4(), "t", 0, 1, leader, 0)


def test_a_silent_zone_counts_as_without_node(tmp_path: Path) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        now = [100_000]
        m = Membership(meta, _rec(1), lease_ms=LEASE, clock_ms=lambda: now[0])
        view = ClusterView(m.live_nodes, answering=m.answering_nodes)

        async def renew(*ids: int) -> None:
            for i in ids:
                await meta.register_node(_rec(i), LEASE, now[0])
            await m.renew()

        def told(zone: str) -> list[int]:
            return sorted(n.node_id for n in view.brokers_for(zone))

        await renew(1, 2, 3, 5, 6)
        assert told("zone-c") == [5, 6] and view.rewrites("zone-c")
        assert view.leader_for(_part(5), "zone-c") in (5, 6)

        # Zone-c's nodes stop renewing; the others go on. A quarter of a lease: still
        # zone-c's own nodes (a renewal may just be late).
        for _ in range(3):
            now[0] += 500
            await renew(1, 2, 3)
        assert told("zone-c") == [5, 6]
        # Past a quarter of a lease, their leases still running: the other zones'
        # nodes, and no leader for a partition a silent node leads.
        now[0] += 600
        await renew(1, 2, 3)
        assert told("zone-c") == [1, 2, 3] and not view.rewrites("zone-c")
        assert view.leader_for(_part(5), "zone-c") == -1
        assert view.leader_for(_part(3), "zone-c") == 3
        assert told("zone-a") == [1, 2], "other zones' clients are told as before"

        # One node of the zone renews again: its zone's clients go back to it.
        await renew(1, 2, 3, 6)
        assert told("zone-c") == [5, 6] and view.rewrites("zone-c")
        await meta.close()

    asyncio.run(run())


def test_silence_is_measured_against_the_newest_renewal_read(tmp_path: Path) -> None:
    """A node that cannot read the metadata store (its view old, the clock running on)
    finds no other node silent: they all look equally old."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        now = [100_000]
        m = Membership(meta, _rec(1), lease_ms=LEASE, clock_ms=lambda: now[0])
        for i in ZONES:
            await meta.register_node(_rec(i), LEASE, now[0])
        await m.renew()
        now[0] += LEASE // 2  # no read since; every lease still runs
        assert sorted(n.node_id for n in m.answering_nodes()) == [1, 2, 3, 5, 6]
        await meta.close()

    asyncio.run(run())
