"""Membership's zone_of answers from an index, never staler than a scan of live_nodes();
live_by_zone counts a zone whose nodes all stopped as 0."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from zonegate.metastore.models import NodeRecord
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.router.membership import Membership

pytestmark = pytest.mark.unit

LEASE = 6000


def _rec(node_id: int, zone: str) -> NodeRecord:
    return NodeRecord(node_id, zone, "127.0.0.1", 9000 + node_id, "127.0.0.1", 9100 + node_id)


def _scan(m: Membership, node_id: int) -> str:
    """What zone_of answered before it had an index."""
    return next((n.zone for n in m.live_nodes() if n.node_id == node_id), "")


def test_zone_of_follows_leases_moves_and_leaves(tmp_path: Path) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        now = [1000]
        m = Membership(meta, _rec(1, "zone-a"), lease_ms=LEASE, clock_ms=lambda: now[0])

        def zones() -> dict[int, str]:
            got = {i: m.zone_of(i) for i in (1, 2, 3, 99)}
            assert got == {i: _scan(m, i) for i in got}
            return got

        assert zones() == {1: "", 2: "", 3: "", 99: ""}  # nothing read yet
        await meta.register_node(_rec(2, "zone-b"), LEASE, now[0])
        await meta.register_node(_rec(3, "zone-c"), LEASE, now[0] + 1000)
        await m.renew()
        assert zones() == {1: "zone-a", 2: "zone-b", 3: "zone-c", 99: ""}

        # Node 2's lease runs out with no renewal in between: it is no longer live.
        now[0] = 1000 + LEASE
        assert zones() == {1: "zone-a", 2: "", 3: "zone-c", 99: ""}  # we count ourselves

        # Node 2 comes back in another zone: known once the membership is re-read.
        await meta.register_node(_rec(2, "zone-c"), LEASE, now[0])
        assert zones()[2] == ""
        await m.renew()
        assert zones() == {1: "zone-a", 2: "zone-c", 3: "zone-c", 99: ""}

        # Node 3 stops cleanly (its lease expired at once).
        await meta.expire_node(3)
        await m.renew()
        assert zones() == {1: "zone-a", 2: "zone-c", 3: "", 99: ""}
        await meta.close()

    asyncio.run(run())


def test_live_by_zone_counts_a_lost_zone_as_zero(tmp_path: Path) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        now = [1000]
        m = Membership(meta, _rec(1, "zone-a"), lease_ms=LEASE, clock_ms=lambda: now[0])
        await meta.register_node(_rec(1, "zone-a"), LEASE, now[0])
        await meta.register_node(_rec(2, "zone-b"), LEASE, now[0])
        await meta.register_node(_rec(3, "zone-b"), LEASE, now[0] + 2000)
        await m.renew()
        assert m.live_by_zone() == {"zone-a": 1, "zone-b": 2}
        now[0] = 1000 + LEASE  # node 2's lease ran out; we count ourselves
        assert m.live_by_zone() == {"zone-a": 1, "zone-b": 1}
        await meta.expire_node(3)  # the zone's last node: its row stays, counted 0
        await m.renew()
        assert m.live_by_zone() == {"zone-a": 1, "zone-b": 0}
        await meta.close()

    asyncio.run(run())
