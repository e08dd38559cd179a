"""A compaction pass visits only the partitions with something in WAL objects, and of
those only the ones whose plan may have changed since (their log, their target, or
the time their tail is due): a node leading 100,000 partitions, each written once,
must not plan them all every 5 s. Over a real SQLite metadata store and a real local
object store, on a manual clock."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.log_changes import HeadView
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.maintenance.compaction import CompactionSettings, Compactor
from zonegate.maintenance.targets import Target
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.records.build import build_batch
from zonegate.runtime.clock import ManualClock
from zonegate.storage.log_cache import LogCache
from zonegate.storage.reader import StreamReader
from zonegate.storage.store_url import open_object_store

pytestmark = pytest.mark.unit

_SEG = 3_600_000


def test_a_pass_skips_partitions_held_with_an_empty_tail(tmp_path: Path) -> None:
    async def run() -> None:
        clock = ManualClock()
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        store = open_object_store((tmp_path / "objects").as_uri())
        leader = LeaderService(meta, clock, lambda _sid: (_SEG, 1 << 30))
        topic = await meta.create_topic("t", {}, [1, 1])
        written, idle = (p.stream_id for p in topic.partitions)
        changes = leader.changes
        visited: Counter[int] = Counter()
        real_head = changes.head

        async def counted_head(stream_id: int) -> HeadView:
            visited[stream_id] += 1
            return await real_head(stream_id)

        changes.head = counted_head  # type: ignore[method-assign]
        compactor = Compactor(
            changes,
            store,
            StreamReader(store, LogCache(0)).read,
            lambda: [Target(written, _SEG, 1 << 30), Target(idle, _SEG, 1 << 30)],
            clock,
            CompactionSettings(stream_object_bytes=64 * 1024, max_delay_ms=60_000),
        )
        blob = build_batch([(b"k", b"v", (), 1000)])
        await store.put("wal/t/0", blob)
        results = await leader.append(
            [AppendBatch(written, ANY_EPOCH, "wal/t/0", 0, len(blob), 1, 1000, -1, -1, -1)]
        )
        assert results[0].error == 0

        # Not held yet: visited once (loaded, found empty); then skipped. The written one
        # is not due before its delay (60 s): planned once, then skipped too, its backlog
        # still counted.
        assert not changes.settled(idle)
        await compactor.run_once()
        assert changes.settled(idle) and not changes.settled(written)
        await compactor.run_once()
        assert visited == {written: 1, idle: 1}
        assert compactor.stats.per_partition == {written: len(blob)}
        assert compactor.stats.oldest_ms == 0

        # Old enough: the tail is written into a stream object; then nothing to visit.
        await clock.advance(60.0)
        await compactor.run_once()
        assert compactor.stats.objects_written == 1 and changes.settled(written)
        await compactor.run_once()
        assert visited == {written: 2, idle: 1}
        assert compactor.stats.per_partition == {} and compactor.stats.backlog_bytes == 0

        # An append puts something in WAL objects again: visited again.
        await store.put("wal/t/1", blob)
        await leader.append(
            [AppendBatch(written, ANY_EPOCH, "wal/t/1", 0, len(blob), 1, 1000, -1, -1, -1)]
        )
        assert not changes.settled(written)
        await compactor.run_once()
        assert visited == {written: 3, idle: 1}
        await meta.close()

    asyncio.run(run())


def test_a_waiting_tail_is_planned_again_when_its_log_its_target_or_its_time_moves(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        clock = ManualClock()
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        store = open_object_store((tmp_path / "objects").as_uri())
        leader = LeaderService(meta, clock, lambda _sid: (_SEG, 1 << 30))
        topic = await meta.create_topic("t", {}, [1])
        (sid,) = (p.stream_id for p in topic.partitions)
        changes = leader.changes
        visits = 0
        real_head = changes.head

        async def counted_head(stream_id: int) -> HeadView:
            nonlocal visits
            visits += 1
            return await real_head(stream_id)

        changes.head = counted_head  # type: ignore[method-assign]
        targets = [Target(sid, _SEG, 1 << 30)]
        compactor = Compactor(
            changes,
            store,
            StreamReader(store, LogCache(0)).read,
            lambda: targets,
            clock,
            CompactionSettings(stream_object_bytes=64 * 1024, max_delay_ms=60_000),
        )
        blob = build_batch([(b"k", b"v", (), 1000)])

        async def append(n: int) -> None:
            await store.put(f"wal/t/{n}", blob)
            batch = AppendBatch(sid, ANY_EPOCH, f"wal/t/{n}", 0, len(blob), 1, 1000, -1, -1, -1)
            assert (await leader.append([batch]))[0].error == 0

        await append(0)
        await compactor.run_once()
        await compactor.run_once()
        assert visits == 1
        # An append: the tail changed, planned again (still not due).
        await clock.advance(30.0)
        await append(1)
        await compactor.run_once()
        await compactor.run_once()
        assert visits == 2 and compactor.stats.objects_written == 0
        assert compactor.stats.per_partition == {sid: 2 * len(blob)}
        assert compactor.stats.oldest_ms == 30_000
        # Its topic's configs changed (another target): planned again.
        targets = [Target(sid, _SEG, 1 << 20)]
        await compactor.run_once()
        await compactor.run_once()
        assert visits == 3 and compactor.stats.objects_written == 0
        # The oldest entry's delay ran out (60 s after its append): planned, written.
        await clock.advance(29.0)
        await compactor.run_once()
        assert visits == 3
        await clock.advance(1.0)
        await compactor.run_once()
        assert visits == 4 and compactor.stats.objects_written == 1
        assert changes.settled(sid) and compactor.stats.per_partition == {}
        await meta.close()

    asyncio.run(run())
