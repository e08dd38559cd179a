"""ZoneProbe: a zone's nodes probed at most once a second each, a refusal held for the
incarnation probed and at most a lease, concurrent requests sharing one probe."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.router.membership import Membership
from zonegate.services.cluster import ClusterSettings, NodeCluster
from zonegate.services.zone_probe import ZoneProbe

pytestmark = pytest.mark.unit


def _rec(node_id: int, incarnation: int = 1) -> NodeRecord:
    return NodeRecord(
        node_id, "zone-c", "127.0.0.1", 9000 + node_id, "10.0.0.1", 9100 + node_id,
        incarnation=incarnation,
    )  # fmt: skip


def test_refusals_are_probed_once_a_second_and_held_for_a_lease() -> None:
    async def run() -> None:
        now = [100.0]
        refusing = {5}
        asked: list[tuple[str, int]] = []

        async def probe(address: tuple[str, int]) -> bool:
            asked.append(address)
            await asyncio.sleep(0)
            return address[1] - 9100 in refusing

        p = ZoneProbe(lambda n: ("dial", n.rpc_port), 6.0, monotonic=lambda: now[0], probe=probe)
        five, six = _rec(5), _rec(6)
        assert not p.refused(five), "never probed"
        await asyncio.gather(p.check([five, six]), p.check([five, six]))
        assert sorted(asked) == [("dial", 9105), ("dial", 9106)], "one probe each, dialled"
        assert p.refused(five) and not p.refused(six)
        assert not p.refused(_rec(5, incarnation=2)), "a new start of the node is not refused"

        now[0] += 0.5
        await p.check([five, six])
        assert len(asked) == 2, "probed less than a second ago"
        now[0] += 0.6
        refusing.clear()  # node 5 back on the same incarnation's address
        await p.check([five])
        assert len(asked) == 3 and not p.refused(five)

        refusing.add(6)
        await p.check([six])
        now[0] += 6.0
        assert not p.refused(six), "a refusal older than a lease no longer counts"

    asyncio.run(run())


def test_a_zone_whose_nodes_refuse_is_answered_with_the_other_zones(tmp_path: Path) -> None:
    """A lost zone's client asking another zone's node before the lost nodes' leases
    end, or even go silent, is told of the live zones' nodes, not sent back."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        me = NodeRecord(1, "zone-a", "127.0.0.1", 9001, "127.0.0.1", 9101)
        m = Membership(meta, me, lease_ms=6000, clock_ms=lambda: 100_000)
        for n in (me, _rec(5), _rec(6)):
            await meta.register_node(n, 6000, 100_000)
        await m.renew()
        refusing: set[int] = set()

        async def probe(address: tuple[str, int]) -> bool:
            return address[1] - 9100 in refusing

        settings = ClusterSettings(1, "zone-a", "c", True, (), dict)
        now = [50.0]
        zones = ZoneProbe(lambda n: ("h", n.rpc_port), 6.0, monotonic=lambda: now[0], probe=probe)
        cluster = NodeCluster(settings, m, zones)
        part = PartitionInfo(uuid.uuid4(), "t", 0, 1, 5, 0)

        await cluster.check_zone("zone-c")
        assert [n.node_id for n in cluster.brokers_for("zone-c")] == [5, 6]
        refusing.update((5, 6))
        now[0] += 1.0  # the next probe is a second later
        await cluster.check_zone("zone-c")
        assert [n.node_id for n in cluster.brokers_for("zone-c")] == [1]
        assert not cluster.rewrites("zone-c")
        assert cluster.leader_for(part, "zone-c") == -1, "its leader refuses: none yet"
        assert [n.node_id for n in cluster.brokers_for("zone-a")] == [1]
        await meta.close()

    asyncio.run(run())
