"""The controller ends the lease of a node whose process is gone (its leader RPC port
refuses connections) instead of waiting it out, and only that: a node that is silent but
still listening (paused, or slow) keeps its lease and its partitions. Real sockets, a real
SQLite metadata store, the controller's clock injected."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from pathlib import Path

import pytest

from zonegate.broker.controller import Controller, LeaderBalance
from zonegate.metastore.models import NodeRecord
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.router.membership import Membership
from zonegate.storage.index import IndexEntry, PartitionCommit

pytestmark = pytest.mark.integration

LEASE_MS = 6000
T0 = 1_800_000_000_000


def _closed_port() -> int:
    """A port nothing listens on: a connection to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_process_loses_its_lease_at_once_a_silent_one_does_not(tmp_path: Path) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        paused = socket.socket()  # a process that is paused: its port still accepts
        paused.bind(("127.0.0.1", 0))
        paused.listen()
        now = T0

        def node(node_id: int, rpc_port: int) -> NodeRecord:
            return NodeRecord(
                node_id, "zone-a", "127.0.0.1", 9092, "127.0.0.1", rpc_port, incarnation=7
            )

        me = node(1, _closed_port())
        await meta.register_node(me, LEASE_MS, now)
        # Nodes 2 and 3 last renewed 2 s ago: their leases run 4 s more.
        await meta.register_node(node(2, _closed_port()), LEASE_MS, now - 2000)
        await meta.register_node(node(3, paused.getsockname()[1]), LEASE_MS, now - 2000)
        topic = await meta.create_topic("t", {}, [2, 3, 1])
        controller = Controller(meta, Membership(meta, me, lease_ms=LEASE_MS), clock_ms=lambda: now)
        now += LEASE_MS  # past the controller's first lease (module doc)
        await meta.register_node(me, LEASE_MS, now)
        await meta.register_node(node(3, paused.getsockname()[1]), LEASE_MS, now - 2000)
        await meta.register_node(node(2, _closed_port()), LEASE_MS, now - 2000)

        moved = await controller.run_once()
        assert moved == 1
        leaders = {p.partition: p.leader_node for p in (await meta.get_topic("t")).partitions}  # type: ignore[union-attr]
        assert leaders[0] in (1, 3) and leaders[1] == 3 and leaders[2] == 1
        nodes = {n.node_id: n for n in await meta.list_nodes()}
        assert not nodes[2].live(now) and nodes[3].live(now)

        # Renewing recently: no probe at all, whatever the port says.
        await meta.register_node(node(3, _closed_port()), LEASE_MS, now - 500)
        assert await controller.run_once() == 0
        assert {n.node_id for n in await meta.list_nodes() if n.live(now)} == {1, 3}
        paused.close()
        await meta.close()
        assert topic.partitions

    asyncio.run(run())


def test_a_dead_controller_is_replaced_at_once(tmp_path: Path) -> None:
    """The node holding the controller lease dies: another node finds its port refused,
    ends its lease, takes the controller lease in the same pass and moves its
    partitions, without waiting out either lease."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        now = T0
        dead = NodeRecord(1, "zone-a", "127.0.0.1", 9092, "127.0.0.1", _closed_port(), 0, 7)
        me = NodeRecord(2, "zone-b", "127.0.0.1", 9093, "127.0.0.1", _closed_port(), 0, 8)
        members = Membership(meta, me, lease_ms=LEASE_MS, clock_ms=lambda: now)
        controller = Controller(meta, members, clock_ms=lambda: now)
        now += LEASE_MS  # past node 2's first lease as controller (module doc)
        # Node 1 last renewed (both its leases) 2 s ago: they run 4 s more.
        await meta.register_node(dead, LEASE_MS, now - 2000)
        assert await meta.acquire_lease("controller", 1, LEASE_MS, now - 2000)
        await meta.register_node(me, LEASE_MS, now)
        await meta.create_topic("t", {}, [1, 2, 1])
        await members.renew(meta)

        assert await controller.run_once() == 2
        assert controller.is_active
        leaders = [p.leader_node for p in (await meta.get_topic("t")).partitions]  # type: ignore[union-attr]
        assert leaders == [2, 2, 2]
        await meta.close()

    asyncio.run(run())


def test_leaders_spread_once_the_other_zones_join_and_only_if_enabled(tmp_path: Path) -> None:
    """A topic made while only node 1 was up: once nodes 2 and 3 (zones b, c) are live,
    a controller pass past its first lease spreads the leaders two per node; with
    auto.leader.rebalance.enable false nothing moves; every move bumps the epoch."""

    async def run(enabled: bool) -> None:
        meta = SqliteMetaStore(str(tmp_path / f"m-{enabled}.db"))
        now = T0

        def node(node_id: int, zone: str) -> NodeRecord:
            return NodeRecord(node_id, zone, "127.0.0.1", 9092, "127.0.0.1", 1, incarnation=1)

        me = node(1, "a")
        await meta.register_node(me, LEASE_MS, now)
        await meta.create_topic("early", {}, [1] * 6)
        balance = LeaderBalance(enabled, interval_ms=1000, imbalance_pct=10)
        controller = Controller(
            meta, Membership(meta, me, lease_ms=LEASE_MS), clock_ms=lambda: now, balance=balance
        )
        assert await controller.run_once() == 0  # its first lease: nothing moves
        now += LEASE_MS
        for n in (me, node(2, "b"), node(3, "c")):
            await meta.register_node(n, LEASE_MS, now)
        moved = await controller.run_once()
        t = await meta.get_topic("early")
        assert t is not None
        leaders = Counter(p.leader_node for p in t.partitions)
        if not enabled:
            assert moved == 0 and leaders == {1: 6}
        else:
            assert moved == 4 and leaders == {1: 2, 2: 2, 3: 2}
            assert all(p.preferred == p.leader_node for p in t.partitions)
            assert sorted(p.leader_epoch for p in t.partitions) == [0, 0, 1, 1, 1, 1]
            now += 2000
            for n in (me, node(2, "b"), node(3, "c")):
                await meta.register_node(n, LEASE_MS, now)
            assert await controller.run_once() == 0  # balanced: left alone
        await meta.close()

    asyncio.run(run(True))
    asyncio.run(run(False))


def test_a_zone_cut_off_from_the_others_loses_its_partitions_and_gets_them_back(
    tmp_path: Path,
) -> None:
    """Zone c's nodes renew their leases but report, and are reported, unreached by zones
    a and b: a quarter lease later the controller (in zone c itself: it judges from the
    rows) holds them cut off and moves their partitions, bumping the epochs, so a commit
    by the deposed leader at its old epoch is fenced; group ownership and placement
    leave them out. A lease after the link heals they are let go, and the leader balance
    brings their partitions back."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        now = T0
        zones = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
        cut = {1: (5, 6), 2: (5, 6), 3: (5, 6), 4: (5, 6), 5: (1, 2, 3, 4), 6: (1, 2, 3, 4)}

        def node(node_id: int, unreached: tuple[int, ...] = ()) -> NodeRecord:
            return NodeRecord(
                node_id, zones[node_id], "h", 9092, "h", 0, incarnation=1, unreached=unreached
            )

        async def renew_all(reports: dict[int, tuple[int, ...]]) -> None:
            for n in zones:
                await meta.register_node(node(n, reports.get(n, ())), LEASE_MS, now)

        members = Membership(meta, node(5), lease_ms=LEASE_MS, clock_ms=lambda: now)
        balance = LeaderBalance(True, interval_ms=1000, imbalance_pct=10)
        controller = Controller(meta, members, clock_ms=lambda: now, balance=balance)
        await renew_all({})
        await meta.create_topic("t", {}, [1, 2, 3, 4, 5, 6])
        now += LEASE_MS  # past the controller's first lease (module doc)
        await renew_all({})
        assert await controller.run_once() == 0

        await renew_all(cut)
        assert await controller.run_once() == 0  # found cut off: held a quarter lease on
        now += LEASE_MS // 4
        await renew_all(cut)
        assert await controller.run_once() == 2
        t = await meta.get_topic("t")
        assert t is not None
        moved = {p.stream_id: p for p in t.partitions if p.partition >= 4}
        assert {p.leader_node for p in moved.values()} <= {1, 2, 3, 4}
        assert all(p.leader_epoch == 1 for p in moved.values())
        rows = {n.node_id: n for n in await meta.list_nodes()}
        assert rows[5].cut_off_ms == now and rows[6].cut_off_ms == now
        assert rows[1].cut_off_ms == 0
        await members.renew(meta)
        assert {n.node_id for n in members.leading_nodes()} == {1, 2, 3, 4}

        # Node 5 led partition 4 at epoch 0; its next commit of it is refused.
        stale = PartitionCommit(
            stream_id=t.partitions[4].stream_id,
            leader_epoch=0,
            next_offset=1,
            entries=(IndexEntry(0, 0, "wal/x", 0, 10, now, now),),
            producers=(),
        )
        assert await meta.commit_appends([stale]) == {t.partitions[4].stream_id}

        # Healed: held a whole lease more, while the balance leaves them alone.
        for _ in range(LEASE_MS // 1000):
            now += 1000
            await renew_all({})
            assert await controller.run_once() == 0
        assert all(n.cut_off_ms for n in await meta.list_nodes() if n.node_id in (5, 6))
        now += 1000
        await renew_all({})
        assert await controller.run_once() == 2  # let go, and the balance moves them home
        t = await meta.get_topic("t")
        assert t is not None
        assert [p.leader_node for p in t.partitions] == [1, 2, 3, 4, 5, 6]
        assert not any(n.cut_off_ms for n in await meta.list_nodes())
        await meta.close()

    asyncio.run(run())
