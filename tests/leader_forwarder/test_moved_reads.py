"""Reads of a partition that moved away from a node and back: the node never serves, as
the leader's, a copy of the partition it loaded while another node led it (a frozen
high watermark: offsets that exist answered OFFSET_OUT_OF_RANGE, and a consumer that
resets to the latest offset then skips them). Over a real SQLite metadata store; each
node's catalog is a dict of the epochs it leads streams at, changed where a refresh
would change it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import AppendBatch
from zonegate.metastore.sqlite import SqliteMetaStore

pytestmark = pytest.mark.unit
A, B = 3, 5  # the nodes of the benchmark run that lost 168 records (STATUS-t28-lost.md)


def _b(sid: int, count: int, leader_epoch: int) -> AppendBatch:
    return AppendBatch(sid, leader_epoch, "obj", 0, 100, count, 1000, -1, -1, -1)


async def _epoch(meta: SqliteMetaStore, sid: int) -> int:
    return (await meta.load_partition(sid)).leader_epoch


def test_a_partition_moved_away_and_back_is_not_served_from_a_copy_of_the_other_leaders(
    tmp_path: Path,
) -> None:
    """The leader balance moves a partition from node A to node B, and ten seconds later
    back to A. Meanwhile A's Watch server (grpc_server.py), woken when A dropped the
    partition, asked again and so loaded it at B's epoch: a copy no append updates. Once
    the partition is A's again, a read that reaches A before A's catalog says so (the
    reading node refreshed first) must not be answered from that copy."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [A])).partitions[0].stream_id
        e0 = await _epoch(meta, sid)
        a_catalog = {sid: e0}  # A's catalog: the epoch A leads each stream at
        a = LeaderService(meta, leads=a_catalog.get)  # node A
        b = LeaderService(meta)  # node B (only appends to it here)
        assert (await a.append([_b(sid, 10, e0)]))[0].base_offset == 0
        await a.changed(sid)  # a node reading the partition watches it on A

        await meta.move_partitions([(sid, B)])  # the leader balance
        e1 = await _epoch(meta, sid)
        # A's catalog refresh, and its listener (moves.forget_moved); a fenced commit
        # drops the state too, before A's catalog knows.
        del a_catalog[sid]
        a.forget([sid])
        # The Watch loop, woken by the drop, asks A again: refused, so the watch ends
        # and its caller re-resolves the leader, and A holds no copy of B's partition.
        with pytest.raises(LeaderUnavailable):
            await a.changed(sid)
        with pytest.raises(LeaderUnavailable):
            await a.offsets(sid)
        assert (await b.append([_b(sid, 10, e1)]))[0].base_offset == 10

        await meta.move_partitions([(sid, A)])  # back to its preferred node
        e2 = await _epoch(meta, sid)
        # No append since (the producers stopped): only A's catalog refresh tells A.
        # Until then a read is refused (the caller refreshes and retries), never
        # answered from what A saw of B's partition.
        with pytest.raises(LeaderUnavailable):
            await a.read_index(sid, 15, 1 << 20)
        a_catalog[sid] = e2
        res = await a.read_index(sid, 15, 1 << 20)
        assert res.error == ErrorCode.none, f"offset 15 of 20 answered {res.error!r}"
        assert res.high_watermark == 20
        assert [e.base_offset for e in res.entries] == [10]
        assert await a.offsets(sid) == (0, 20, e2)
        assert (await a.append([_b(sid, 1, e2)]))[0].base_offset == 20
        await meta.close()

    asyncio.run(run())


def test_a_copy_loaded_before_the_catalog_named_this_node_is_reloaded_when_it_does(
    tmp_path: Path,
) -> None:
    """A read raced the catalog: A's catalog still said A at epoch E while the store had
    moved the partition to B (E+1). A loaded B's partition, refused to serve it, and
    must not serve it later either, when the partition comes back at E+2."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [A])).partitions[0].stream_id
        e0 = await _epoch(meta, sid)
        a_catalog = {sid: e0}
        a, b = LeaderService(meta, leads=a_catalog.get), LeaderService(meta)
        await meta.move_partitions([(sid, B)])
        e1 = await _epoch(meta, sid)
        with pytest.raises(LeaderUnavailable):  # the store is ahead of A's catalog
            await a.offsets(sid)
        assert (await b.append([_b(sid, 4, e1)]))[0].base_offset == 0
        await meta.move_partitions([(sid, A)])
        a_catalog[sid] = await _epoch(meta, sid)  # A's catalog jumps from E to E+2
        assert (await a.offsets(sid))[1] == 4

    asyncio.run(run())
