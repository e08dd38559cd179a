"""Compaction of WAL ranges into stream objects: when, what, and the fenced swap, over a real
SQLite metadata store and a real local object store, on a manual clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.maintenance.compaction import CompactionSettings, Compactor, merge_previous, plan
from zonegate.maintenance.targets import Target
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.records.batch import iter_batches
from zonegate.records.build import build_batch
from zonegate.records.decode import decode_records
from zonegate.runtime.clock import ManualClock
from zonegate.storage.index import IndexEntry
from zonegate.storage.log_cache import LogCache
from zonegate.storage.reader import StreamReader
from zonegate.storage.store_url import open_object_store
from zonegate.storage.stream_objects import is_stream_key

pytestmark = pytest.mark.unit

_SEG = 3_600_000


def _e(base: int, n: int, length: int, append_ms: int) -> IndexEntry:
    return IndexEntry(base, base + n - 1, f"wal/{base}", 0, length, 0, append_ms)


def test_plan_writes_full_objects_and_the_rest_only_once_old() -> None:
    settings = CompactionSettings(stream_object_bytes=1000, max_delay_ms=60_000)
    target = Target(1, _SEG, 1 << 30)
    tail = [_e(i * 10, 10, 300, 1_000) for i in range(7)]  # 2,100 bytes
    # Young: only full objects (3 entries = 900 < 1000 would not be full; 4 would be 1200).
    runs = plan(tail, 2_000, target, settings)
    assert [[e.base_offset for e in r] for r in runs] == [[0, 10, 20], [30, 40, 50]]
    # Old: the whole tail, in objects within the size.
    runs = plan(tail, 1_000 + 60_000, target, settings)
    assert [len(r) for r in runs] == [3, 3, 1]
    # segment.ms shorter than the delay bound wins.
    assert [len(r) for r in plan(tail, 1_000 + 5_000, Target(1, 5_000, 1 << 30), settings)] == [
        3,
        3,
        1,
    ]
    # segment.bytes smaller than the object size wins.
    assert [len(r) for r in plan(tail, 2_000, Target(1, _SEG, 600), settings)] == [2, 2, 2]
    assert plan([], 10**12, target, settings) == []
    assert plan(tail[:1], 2_000, target, settings) == []


def test_plan_counts_a_run_full_only_when_it_reaches_the_size() -> None:
    settings = CompactionSettings(stream_object_bytes=1000, max_delay_ms=60_000)
    tail = [_e(0, 1, 999, 0 + 1), _e(1, 1, 1, 1)]
    runs = plan(tail, 2, Target(1, _SEG, 1 << 30), settings)
    assert [[e.base_offset for e in r] for r in runs] == [[0, 1]]


class _Rig:
    def __init__(self, tmp: Path, clock: ManualClock) -> None:
        self.meta = SqliteMetaStore(str(tmp / "m.db"))
        self.store = open_object_store((tmp / "objects").as_uri())
        self.clock = clock
        self.leader = LeaderService(self.meta, clock, lambda _sid: (_SEG, 1 << 30))
        self.reader = StreamReader(self.store, LogCache(0))
        self.sid = -1
        self.n = 0
        self.compactor = Compactor(
            self.leader.changes,
            self.store,
            self.reader.read,
            lambda: [Target(self.sid, _SEG, 1 << 30)],
            clock,
            CompactionSettings(stream_object_bytes=64 * 1024, max_delay_ms=60_000),
        )

    async def setup(self) -> None:
        t = await self.meta.create_topic("t", {}, [1])
        self.sid = t.partitions[0].stream_id

    async def produce(self, batches: int, records: int = 5) -> None:
        """Each batch in a WAL object of its own, behind another partition's bytes."""
        out = []
        for _ in range(batches):
            blob = build_batch(
                [(b"k", b"v%06d" % (self.n + j), (), 1000 + self.n + j) for j in range(records)]
            )
            key = f"wal/t/{self.n:08d}"
            await self.store.put(key, b"x" * 77 + blob)
            out.append(
                AppendBatch(
                    self.sid,
                    ANY_EPOCH,
                    key,
                    77,
                    len(blob),
                    records,
                    1000 + self.n + records - 1,
                    -1,
                    -1,
                    -1,
                )
            )
            self.n += records
        results = await self.leader.append(out)
        assert all(r.error == 0 for r in results)

    async def values(self) -> list[bytes]:
        """Every record value, read from the log start through the leader's index."""
        out: list[bytes] = []
        offset, hwm, _ = await self.leader.offsets(self.sid)
        while offset < hwm:
            res = await self.leader.read_index(self.sid, offset, 1 << 20)
            assert res.error == 0 and res.entries
            blobs = await self.reader.read(res.entries)
            for e, blob in zip(res.entries, blobs, strict=True):
                if is_stream_key(e.object_key):
                    # A chunk: whole batches, base offsets final already.
                    for pos, h in iter_batches(memoryview(blob)):
                        assert h.base_offset >= e.base_offset
                        out += [r.value or b"" for r in decode_records(blob[pos : pos + h.size])]
                else:
                    recs = decode_records(blob)
                    out += [r.value or b"" for r in recs]
                offset = e.last_offset + 1
        return out


def test_compaction_rewrites_the_tail_and_reads_see_the_same_records(tmp_path: Path) -> None:
    async def run() -> None:
        rig = _Rig(tmp_path, ManualClock())
        await rig.setup()
        await rig.produce(400)  # about 40 KiB: below the object size
        before = await rig.values()
        await rig.compactor.run_once()
        assert rig.compactor.stats.objects_written == 0  # young and small: left alone
        assert rig.compactor.stats.backlog_bytes > 0

        await rig.produce(400)  # now past 64 KiB: one full object
        await rig.compactor.run_once()
        stats = rig.compactor.stats
        assert stats.objects_written == 1
        assert stats.backlog_bytes < 64 * 1024
        rows = await rig.meta.read_index(rig.sid)
        streams = [e for e in rows if is_stream_key(e.object_key)]
        assert streams and rows[: len(streams)] == streams  # stream entries lead
        assert len(streams) == 1  # 64 KiB: one chunk
        assert await rig.values() == before + [b"v%06d" % i for i in range(2000, 4000)]

        # Old enough: the whole rest is written; the tail is empty.
        await rig.clock.advance(60.0)
        await rig.compactor.run_once()
        _, tail = await rig.leader.changes.tail(rig.sid)
        assert tail == [] and rig.compactor.stats.backlog_bytes == 0
        values = await rig.values()
        assert values == [b"v%06d" % i for i in range(4000)]
        rows = await rig.meta.read_index(rig.sid)
        assert all(is_stream_key(e.object_key) for e in rows)

        # A new leader over the same store finds the stream entries and an empty tail.
        leader2 = LeaderService(rig.meta, rig.clock)
        _, tail2 = await leader2.changes.tail(rig.sid)
        assert tail2 == []
        rig.leader = leader2
        assert await rig.values() == values
        # By timestamp: the chunk holding record 2500's timestamp.
        found = await leader2.entries_from_timestamp(rig.sid, 1000 + 2500)
        assert found[0].base_offset <= 2500 <= found[0].last_offset
        await rig.meta.close()

    asyncio.run(run())


def test_a_swap_is_refused_when_the_range_changed_or_the_leader_moved(tmp_path: Path) -> None:
    async def run() -> None:
        rig = _Rig(tmp_path, ManualClock())
        await rig.setup()
        await rig.produce(10)
        epoch, tail = await rig.leader.changes.tail(rig.sid)
        blobs = await rig.reader.read(tail)
        from zonegate.storage.stream_objects import build_stream_object

        obj = build_stream_object(
            rig.sid, epoch, list(zip(tail, blobs, strict=True)), segment_ms=_SEG
        )
        # DeleteRecords took the first entry meanwhile: the swap would resurrect it.
        await rig.leader.delete_records(rig.sid, 5)
        assert not await rig.leader.changes.swap(rig.sid, epoch, tail, obj.entries)
        assert await rig.values() == [b"v%06d" % i for i in range(5, 50)]
        # The leader moved: fenced.
        epoch, tail = await rig.leader.changes.tail(rig.sid)
        await rig.meta.move_partitions([(rig.sid, 9)])
        assert not await rig.leader.changes.swap(rig.sid, epoch, tail, obj.entries)
        rows = await rig.meta.read_index(rig.sid)
        assert not any(is_stream_key(e.object_key) for e in rows)
        await rig.meta.close()

    asyncio.run(run())


def test_a_refused_swap_deletes_its_object_and_the_next_pass_replans(tmp_path: Path) -> None:
    async def run() -> None:
        rig = _Rig(tmp_path, ManualClock())
        await rig.setup()
        await rig.produce(10)
        await rig.clock.advance(120.0)
        real_swap = rig.leader.changes.swap

        async def truncating_swap(sid, epoch, old, new):  # type: ignore[no-untyped-def]
            await rig.leader.delete_records(sid, 5)  # retention lands between PUT and swap
            return await real_swap(sid, epoch, old, new)

        rig.leader.changes.swap = truncating_swap  # type: ignore[method-assign]
        await rig.compactor.run_once()
        assert rig.compactor.stats.swaps_refused == 1
        assert await rig.store.list("streams/") == []  # the wasted object went at once
        rig.leader.changes.swap = real_swap  # type: ignore[method-assign]
        await rig.compactor.run_once()
        assert rig.compactor.stats.objects_written == 1
        assert len(await rig.store.list("streams/")) == 1
        assert await rig.values() == [b"v%06d" % i for i in range(5, 50)]
        await rig.meta.close()

    asyncio.run(run())


def test_plan_cuts_a_retained_topics_objects_at_segment_boundaries() -> None:
    """Deleting by time: objects hold whole segments, at most retention.ms / 32 of appends;
    by size: they end at the first segment boundary past retention.bytes / 32."""
    settings = CompactionSettings(stream_object_bytes=1 << 20, max_delay_ms=10_000)
    tail = [_e(i * 10, 10, 100, 1_000 * i) for i in range(8)]  # one entry per second
    old = 100_000
    # A short retention: one object per 1 s segment.
    short = Target(1, 1_000, 1 << 30, retention_ms=20_000)
    assert [len(r) for r in plan(tail, old, short, settings)] == [1] * 8
    # A long one with the same short segments: 4 s of segments per object, cut on the grid.
    long = Target(1, 1_000, 1 << 30, retention_ms=128_000)
    assert [len(r) for r in plan(tail, old, long, settings)] == [4, 4]
    # Deleting by size: 250 bytes or more, then the next segment boundary.
    by_size = Target(1, 1_000, 1 << 30, retention_bytes=32 * 250)
    assert [len(r) for r in plan(tail, old, by_size, settings)] == [3, 3, 2]
    # No retention: the size alone.
    assert [len(r) for r in plan(tail, old, Target(1, 1_000, 1 << 30), settings)] == [8]


def test_plan_leaves_a_short_retention_to_expire_in_the_wal_objects() -> None:
    """Retention keeps less than the delay bound (retention.ms within it, or the partition
    at its retention.bytes with its oldest data younger than it): retention drops the
    ranges from the WAL objects in time; only full objects are written. Otherwise, or for
    a compacted topic, they are."""
    settings = CompactionSettings(stream_object_bytes=1_000, max_delay_ms=60_000)
    tail = [_e(i * 10, 10, 300, 1_000) for i in range(4)]
    now = 1_000 + 60_000
    assert [len(r) for r in plan(tail, now, Target(1, 1_000, 1 << 30, None, 60_000), settings)] == [
        3
    ]
    long = Target(1, 1_000, 1 << 30, None, 60_001)
    assert [len(r) for r in plan(tail, now, long, settings, now, 1 << 30)] == [3, 1]
    by_size = Target(1, 1_000, 1 << 30, None, -1, 10_000)
    assert [len(r) for r in plan(tail, now, by_size, settings, now - 59_999, 10_000)] == [3]
    assert [len(r) for r in plan(tail, now, by_size, settings, now - 60_000, 10_000)] == [3, 1]
    assert [len(r) for r in plan(tail, now, by_size, settings, now, 9_999)] == [3, 1]  # young
    from zonegate.storage.cleaner import CleanerConfig

    compacted = Target(1, 1_000, 1 << 30, CleanerConfig(), 50_000)
    assert [len(r) for r in plan(tail, now, compacted, settings, now)] == [3, 1]


def _s(base: int, n: int, length: int, append_ms: int, key: str = "streams/1/a") -> IndexEntry:
    return IndexEntry(base, base + n - 1, key, 0, length, 0, append_ms)


def test_merge_previous_is_size_tiered_below_the_run_and_inside_its_window() -> None:
    settings = CompactionSettings(stream_object_bytes=1_000, max_delay_ms=60_000)
    target = Target(1, _SEG, 1 << 30)
    previous = [_s(0, 10, 100, 1_000), _s(10, 10, 100, 2_000)]
    run = [_e(20, 10, 300, 3_000)]
    assert merge_previous(previous, run, target, settings)
    # Not directly below, or no object at all.
    assert not merge_previous(previous, [_e(21, 10, 300, 3_000)], target, settings)
    assert not merge_previous([], run, target, settings)
    # Larger than what is merged so far (tiers: objects grow by doubling) ...
    assert not merge_previous(previous, [_e(20, 10, 199, 3_000)], target, settings)
    assert merge_previous(previous, [_e(20, 10, 200, 3_000)], target, settings)
    # ... or the two would not fit in one object.
    assert not merge_previous(previous, [_e(20, 10, 801, 3_000)], target, settings)
    # segment.bytes smaller than the object size bounds both.
    assert not merge_previous(previous, run, Target(1, _SEG, 499), settings)
    assert not merge_previous(previous, run, target, CompactionSettings(merge=False))
    # A compacted topic's objects are cleaning's; a cleaned object keeps its mark.
    from zonegate.storage.cleaner import CleanerConfig

    assert not merge_previous(previous, run, Target(1, _SEG, 1 << 30, CleanerConfig()), settings)
    marked = [_s(0, 20, 200, 1_000, "streams/1/" + "0" * 20 + "-" + "0" * 18 + "19-0-ab-c")]
    assert not merge_previous(marked, run, target, settings)
    # Deleting by time: never across an object window (here 4 s of 1 s segments).
    timed = Target(1, 1_000, 1 << 30, retention_ms=128_000)
    assert merge_previous(previous, run, timed, settings)
    assert not merge_previous(previous, [_e(20, 10, 300, 4_000)], timed, settings)
    # Deleting by size: the merged object stays under its share of retention.bytes.
    assert merge_previous(
        previous, run, Target(1, _SEG, 1 << 30, retention_bytes=32 * 501), settings
    )
    assert not merge_previous(
        previous, run, Target(1, _SEG, 1 << 30, retention_bytes=32 * 500), settings
    )


def test_plan_writes_a_held_tail_by_half_delays_once_its_oldest_waited() -> None:
    """A delete-only topic's tail waits the delay; then what waited half of it goes too,
    so a partition written a little at a time gets an object every half delay at most,
    not one per pass."""
    settings = CompactionSettings(stream_object_bytes=1 << 20, max_delay_ms=60_000)
    tail = [_e(i * 10, 10, 100, 10_000 * i) for i in range(7)]  # one entry per 10 s
    target = Target(1, _SEG, 1 << 30, retention_ms=7 * 86_400_000)
    assert plan(tail, 59_999, target, settings) == []
    (run,) = plan(tail, 60_000, target, settings)
    assert [e.base_offset for e in run] == [0, 10, 20, 30]  # appended 30 s ago or more
    assert plan(tail[4:], 60_000 + 10_000, target, settings) == []


def test_a_slow_partition_keeps_few_objects(tmp_path: Path) -> None:
    """Each compaction delay writes a little: the partition's stream objects are merged
    into the next one by size tiers, so it keeps a few objects and rows, not one each
    time, and each byte is written again a few times at most."""

    async def run() -> None:
        rig = _Rig(tmp_path, ManualClock())
        await rig.setup()
        for _ in range(16):  # 16 delays of 10 batches (about 1 KiB each time)
            await rig.produce(10)
            await rig.clock.advance(61.0)
            await rig.compactor.run_once()
        stats = rig.compactor.stats
        assert stats.objects_written == 16 and stats.objects_merged == 15
        rows = await rig.meta.read_index(rig.sid)
        assert len({e.object_key for e in rows}) == 1 and len(rows) == 1  # 16 = 2**4
        assert await rig.values() == [b"v%06d" % i for i in range(800)]
        # Every WAL byte counted once as compacted; what merges wrote again apart (the
        # first run's bytes 4 times, log2(16), the last's none: twice on average).
        assert stats.bytes_compacted == sum(e.length for e in rows)
        assert stats.bytes_merged == 2 * stats.bytes_compacted  # runs 1..15: 32 in all
        await rig.produce(10)  # the 17th: an object of its own beside the 16 runs' one
        await rig.clock.advance(61.0)
        await rig.compactor.run_once()
        rows = await rig.meta.read_index(rig.sid)
        assert len({e.object_key for e in rows}) == 2
        assert await rig.values() == [b"v%06d" % i for i in range(850)]
        await rig.meta.close()

    asyncio.run(run())


def test_a_full_run_reads_no_index_for_merging() -> None:
    """`may_merge` tells without I/O that no earlier object fits beside a full run, the
    same answer `merge_previous` would give for any object below it."""
    from zonegate.maintenance.compaction import may_merge
    from zonegate.storage.cleaner import CleanerConfig

    settings = CompactionSettings(stream_object_bytes=1_000, max_delay_ms=60_000)
    target = Target(1, _SEG, 1 << 30)
    full = [_e(20, 10, 1_000, 3_000)]
    assert not may_merge(full, target, settings)
    assert not merge_previous([_s(0, 20, 1, 1_000)], full, target, settings)
    assert may_merge([_e(20, 10, 999, 3_000)], target, settings)
    assert not may_merge([_e(20, 10, 10, 3_000)], Target(1, _SEG, 10), settings)
    assert not may_merge(
        [_e(20, 10, 10, 3_000)], Target(1, _SEG, 1 << 30, CleanerConfig()), settings
    )
    assert not may_merge([_e(20, 10, 10, 3_000)], target, CompactionSettings(merge=False))
