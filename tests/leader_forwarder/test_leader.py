"""The leader's sequencing and group commit, over a real SQLite metadata store."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.metastore.models import MetaStoreUnavailable
from zonegate.metastore.sqlite import SqliteMetaStore

pytestmark = pytest.mark.unit


def _b(
    sid: int,
    count: int,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    leader_epoch: int = ANY_EPOCH,
    key: str = "obj",
) -> AppendBatch:
    return AppendBatch(sid, leader_epoch, key, 0, 100, count, 1000, pid, epoch, seq)


def test_offsets_idempotence_and_restart(tmp_path: Path) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        t = await meta.create_topic("t", {}, [1, 1])
        s0, s1 = (p.stream_id for p in t.partitions)
        leader = LeaderService(meta)
        await leader.offsets(s0)
        await leader.offsets(s1)
        # Concurrent appends from several callers land in one group commit.
        results = await asyncio.gather(
            leader.append([_b(s0, 3, pid=7, epoch=0, seq=0)]),
            leader.append([_b(s0, 2, pid=7, epoch=0, seq=3), _b(s1, 4)]),
            leader.append([_b(s0, 3, pid=7, epoch=0, seq=0)]),  # duplicate of the first
        )
        assert [r.base_offset for r in results[0]] == [0]
        assert [r.base_offset for r in results[1]] == [3, 0]
        assert results[2][0].error == ErrorCode.none and results[2][0].base_offset == 0
        assert leader.commit_cycles == 1
        gap = await leader.append([_b(s0, 1, pid=7, epoch=0, seq=9)])
        assert gap[0].error == ErrorCode.out_of_order_sequence_number
        await meta.close()

        # A new leader over the same store knows the offsets and producer state.
        meta2 = SqliteMetaStore(str(tmp_path / "m.db"))
        leader2 = LeaderService(meta2)
        assert await leader2.offsets(s0) == (0, 5, 0)
        dup = await leader2.append([_b(s0, 2, pid=7, epoch=0, seq=3)])
        assert dup[0].base_offset == 3
        nxt = await leader2.append([_b(s0, 1, pid=7, epoch=0, seq=5)])
        assert nxt[0].base_offset == 5
        stale = await leader2.append([_b(s0, 1, pid=7, epoch=0, seq=6, leader_epoch=-5)])
        assert stale[0].error == ErrorCode.fenced_leader_epoch
        idx = await leader2.read_index(s0, 4, 1 << 20)
        assert [e.base_offset for e in idx.entries] == [3, 5]
        assert idx.high_watermark == 6
        assert (await leader2.read_index(s0, 7, 100)).error == ErrorCode.offset_out_of_range
        await meta2.close()

    asyncio.run(run())


def test_commit_fenced_when_epoch_moved(tmp_path: Path) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        t = await meta.create_topic("t", {}, [1])
        sid = t.partitions[0].stream_id
        leader = LeaderService(meta)
        assert (await leader.append([_b(sid, 1)]))[0].base_offset == 0
        # Another actor moves the partition (bumps its epoch) behind this leader's back.
        await meta.delete_topic("t")
        res = await leader.append([_b(sid, 1)])
        assert res[0].error == ErrorCode.not_leader_or_follower
        await meta.close()

    asyncio.run(run())


def test_a_commit_that_lands_while_its_partition_is_dropped_is_answered_as_written(
    tmp_path: Path,
) -> None:
    """The catalog drops a partition (it moved) while a group commit of it is in flight:
    the commit is in the store, so its callers get their offsets, not an error that
    would make them retry."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        t = await meta.create_topic("t", {}, [1])
        sid = t.partitions[0].stream_id
        leader = LeaderService(meta)
        await leader.offsets(sid)
        real_commit = meta.commit_appends

        async def commit_then_drop(commits):  # type: ignore[no-untyped-def]
            fenced = await real_commit(commits)
            leader.forget([sid])  # what a catalog refresh does when the partition moves
            return fenced

        meta.commit_appends = commit_then_drop  # type: ignore[method-assign]
        (res,) = await leader.append([_b(sid, 3, pid=7, epoch=0, seq=0)])
        assert res.error == ErrorCode.none and res.base_offset == 0
        meta.commit_appends = real_commit  # type: ignore[method-assign]
        # The next use reloads the partition from the store: the batch is there, and a
        # retry of it is answered with its offset, not written again.
        assert await leader.offsets(sid) == (0, 3, 0)
        (dup,) = await leader.append([_b(sid, 3, pid=7, epoch=0, seq=0)])
        assert dup.base_offset == 0
        assert (await leader.offsets(sid))[1] == 3
        await meta.close()

    asyncio.run(run())


def test_appends_while_the_store_is_out_of_reach_get_retriable_errors_that_do_not_lie(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The metadata store is down: a batch whose commit failed is answered
    REQUEST_TIMED_OUT (it may have landed), one that never reached the store
    KAFKA_STORAGE_ERROR; clients retry both. The log says so once rather than a
    traceback per request, and the same batches are committed once, when the store is
    back."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [1])).partitions[0].stream_id
        leader = LeaderService(meta)
        await leader.offsets(sid)
        real_commit = meta.commit_appends

        real_load = meta.load_partition

        async def down(commits):  # type: ignore[no-untyped-def]
            raise MetaStoreUnavailable("PostgreSQL unreachable: [Errno 111] Connection refused")

        async def load_down(stream_id):  # type: ignore[no-untyped-def]
            raise MetaStoreUnavailable("PostgreSQL unreachable: [Errno 111] Connection refused")

        meta.commit_appends = down  # type: ignore[method-assign]
        res = await leader.append([_b(sid, 2, pid=7, epoch=0, seq=0), _b(sid, 1)])
        # A commit that failed may have landed: not "not written" (directory.py).
        assert [r.error for r in res] == [ErrorCode.request_timed_out] * 2
        # The partition is reloaded before its next append, and that load fails too:
        # nothing reached the store, nothing was written.
        meta.load_partition = load_down  # type: ignore[method-assign]
        res = await leader.append([_b(sid, 2, pid=7, epoch=0, seq=0)])
        assert [r.error for r in res] == [ErrorCode.kafka_storage_error]
        meta.commit_appends = real_commit  # type: ignore[method-assign]
        meta.load_partition = real_load  # type: ignore[method-assign]
        res = await leader.append([_b(sid, 2, pid=7, epoch=0, seq=0), _b(sid, 1)])
        assert [(r.error, r.base_offset) for r in res] == [(ErrorCode.none, 0), (ErrorCode.none, 2)]

        # A commit lands and its answer is lost with the connection: the retry of the
        # idempotent batch is answered with its offset, not written again.
        async def lands_then_lost(commits):  # type: ignore[no-untyped-def]
            await real_commit(commits)
            raise MetaStoreUnavailable("PostgreSQL unreachable: connection lost")

        meta.commit_appends = lands_then_lost  # type: ignore[method-assign]
        (res0,) = await leader.append([_b(sid, 2, pid=7, epoch=0, seq=2)])
        assert res0.error == ErrorCode.request_timed_out
        meta.commit_appends = real_commit  # type: ignore[method-assign]
        (res1,) = await leader.append([_b(sid, 2, pid=7, epoch=0, seq=2)])
        assert (res1.error, res1.base_offset) == (ErrorCode.none, 3)
        assert (await leader.offsets(sid))[1] == 5
        await meta.close()

    with caplog.at_level(logging.WARNING, logger="zonegate.leader_forwarder.leader"):
        asyncio.run(run())
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 4 and "until the metadata store is back" in said[0], said
    assert said[1] == said[3] == "appends are committed again"
    assert not any(r.exc_info for r in caplog.records)


def test_a_reload_during_a_commit_waits_for_it(tmp_path: Path) -> None:
    """The partition's state is dropped (a catalog change) while a commit of it is in
    flight, and an append reloads it: the load waits for the commit, or it would read
    the offsets before it and hand them out again (seen as a duplicate-key error in a
    rolling restart)."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [1])).partitions[0].stream_id
        leader = LeaderService(meta)
        await leader.offsets(sid)
        real_commit, real_load = meta.commit_appends, meta.load_partition
        landed, read = asyncio.Event(), asyncio.Event()
        reloads = []

        loads = []

        async def load(stream_id):  # type: ignore[no-untyped-def]
            loads.append(stream_id)
            state = await real_load(stream_id)
            read.set()
            await landed.wait()  # returns after the commit's own bookkeeping
            return state

        async def commit_racing(commits):  # type: ignore[no-untyped-def]
            meta.commit_appends = real_commit  # type: ignore[method-assign]
            leader.forget([sid])
            reloads.append(asyncio.ensure_future(leader.offsets(sid)))
            for _ in range(3):
                await asyncio.sleep(0)  # the reload runs up to its first wait
            if loads:  # it went to the store at once: let it read before the commit
                await read.wait()
            fenced = await real_commit(commits)
            landed.set()
            return fenced

        meta.commit_appends = commit_racing  # type: ignore[method-assign]
        meta.load_partition = load  # type: ignore[method-assign]
        (first,) = await leader.append([_b(sid, 3)])
        assert (first.error, first.base_offset) == (ErrorCode.none, 0)
        assert (await reloads[0])[1] == 3, "the reload saw the commit"
        (second,) = await leader.append([_b(sid, 2)])
        assert (second.error, second.base_offset) == (ErrorCode.none, 3)
        await meta.close()

    asyncio.run(run())


def test_a_catalog_change_keeps_state_already_loaded_at_the_new_epoch(tmp_path: Path) -> None:
    """A partition moved to this node and its first append (carrying the new epoch) came
    before this node's catalog said so: the catalog change that follows must not drop
    the state just loaded (a needless reload, and the race of the test above)."""

    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [1])).partitions[0].stream_id
        leader = LeaderService(meta)
        real_load = meta.load_partition
        loads = []

        async def counted(stream_id):  # type: ignore[no-untyped-def]
            loads.append(stream_id)
            return await real_load(stream_id)

        meta.load_partition = counted  # type: ignore[method-assign]
        await leader.offsets(sid)
        await meta.move_partitions([(sid, 2)])  # epoch 1
        (res,) = await leader.append([_b(sid, 2, leader_epoch=1)])
        assert res.error == ErrorCode.none and len(loads) == 2, "reloaded at epoch 1"
        leader.forget_unless_at({sid: 1})
        await leader.offsets(sid)
        assert len(loads) == 2, "kept"
        leader.forget_unless_at({sid: 2})
        await leader.offsets(sid)
        assert len(loads) == 3, "dropped: not held at that epoch"
        await meta.close()

    asyncio.run(run())
