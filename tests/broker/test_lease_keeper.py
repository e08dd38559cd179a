"""Lease renewals go on while the serving loop is busy, and stop when it is stuck.

The serving loop is blocked on purpose here (time.sleep on it), as a flood of
client work would block it: issue 12's catch-up consumer made healthy nodes
miss renewals and lose their partitions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from zonegate.broker.controller import Controller
from zonegate.broker.lease_keeper import LeaseKeeper
from zonegate.metastore.models import MetaStoreUnavailable, NodeRecord
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.router.membership import Membership, wall_ms

pytestmark = pytest.mark.integration

LEASE_MS = 600


def _block_the_loop(seconds: float) -> None:
    """What a flood of client work does to the serving loop: it does not turn."""
    time.sleep(seconds)


def _keeper(path: Path, stall_s: float) -> tuple[SqliteMetaStore, Membership, LeaseKeeper]:
    meta = SqliteMetaStore(str(path))
    me = NodeRecord(1, "zone-a", "127.0.0.1", 9092, "127.0.0.1", 9192)
    membership = Membership(meta, me, lease_ms=LEASE_MS)
    keeper = LeaseKeeper(
        lambda: SqliteMetaStore(str(path)),
        membership,
        Controller(meta, membership),
        interval_s=0.1,
        stall_s=stall_s,
    )
    return meta, membership, keeper


async def _lease_left_ms(meta: SqliteMetaStore) -> int:
    (node,) = await meta.list_nodes()
    return node.lease_expires_ms - wall_ms()


def test_renewals_go_on_while_the_serving_loop_is_blocked(tmp_path: Path) -> None:
    async def run() -> None:
        meta, membership, keeper = _keeper(tmp_path / "meta.db", stall_s=30)
        await membership.renew()
        await keeper.start()
        before = keeper.renewals
        _block_the_loop(4 * LEASE_MS / 1000)  # for 4 leases
        assert keeper.renewals >= before + 10
        assert await _lease_left_ms(meta) > 0  # still live: nobody would move its partitions
        await keeper.stop()
        await membership.stop()
        assert await _lease_left_ms(meta) < 0  # a clean stop expires the lease at once
        await meta.close()

    asyncio.run(run())


def test_a_stuck_serving_loop_stops_the_renewals(tmp_path: Path) -> None:
    async def run() -> None:
        meta, membership, keeper = _keeper(tmp_path / "meta.db", stall_s=0.5)
        await membership.renew()
        await keeper.start()
        await asyncio.sleep(0.3)
        _block_the_loop(0.5 + 2 * LEASE_MS / 1000)  # past the stall limit and a lease
        assert await _lease_left_ms(meta) < 0  # it lapsed: the controller may move partitions
        stuck_at = keeper.renewals
        await asyncio.sleep(0.5)  # the loop turns again: renewals resume
        assert keeper.renewals > stuck_at
        assert await _lease_left_ms(meta) > 0
        await keeper.stop()
        await meta.close()

    asyncio.run(run())


def test_a_store_outage_is_said_once_not_at_every_heartbeat(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> None:
        meta, membership, keeper = _keeper(tmp_path / "meta.db", stall_s=30)
        real_register, real_acquire = meta.register_node, meta.acquire_lease

        async def down(*_args: object) -> bool:
            raise MetaStoreUnavailable("PostgreSQL unreachable: [Errno 111] Connection refused")

        meta.register_node = down  # type: ignore[method-assign]
        meta.acquire_lease = down  # type: ignore[method-assign]
        for _ in range(5):
            await keeper.pass_once(meta)
        meta.register_node = real_register  # type: ignore[method-assign]
        meta.acquire_lease = real_acquire  # type: ignore[method-assign]
        await keeper.pass_once(meta)
        await keeper.pass_once(meta)
        assert keeper.renewals == 2
        await meta.close()

    with caplog.at_level(logging.WARNING, logger="zonegate.broker.lease_keeper"):
        asyncio.run(run())
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "cannot renew its lease until the store is back" in said[0]
    assert said[1] == "node 1 renews its lease again"


class _SlowController(Controller):
    """A controller pass that takes a second, as a pass of many reads over a slow link to
    the metadata store does (200 ms a round trip)."""

    async def run_once(self, meta: object) -> None:  # type: ignore[override]
        await asyncio.sleep(1.0)


def test_a_slow_controller_pass_does_not_hold_back_the_renewals(tmp_path: Path) -> None:
    """Renewals more than a quarter lease apart make the other nodes count this one
    silent (router/membership.py) and tell clients its partitions have no leader."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        me = NodeRecord(1, "zone-a", "127.0.0.1", 9092, "127.0.0.1", 9192)
        membership = Membership(meta, me, lease_ms=LEASE_MS)
        keeper = LeaseKeeper(
            lambda: SqliteMetaStore(str(tmp_path / "meta.db")),
            membership,
            _SlowController(meta, membership),
            interval_s=0.1,
            stall_s=30,
        )
        await membership.renew()
        await keeper.start()
        before = keeper.renewals
        await asyncio.sleep(1.5)
        # One renewal every 0.1 s goes on beside the passes (with the pass in between,
        # one every 1.1 s: 1 or 2).
        assert keeper.renewals >= before + 8
        await keeper.stop()
        await membership.stop()
        await meta.close()

    asyncio.run(run())
