"""Retention after compaction: the stream object at a partition's head is split by segment,
so the bucket frees bytes at Kafka's segment granularity. The pure policy, and the whole
path (compaction, retention, splitting, object GC) over a real SQLite metadata store and
an object store in memory, on a manual clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.storage.fakes import MemoryStore
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.maintenance.compaction import CompactionSettings, Compactor, plan
from zonegate.maintenance.gc import GcSettings, ObjectGc
from zonegate.maintenance.retention import Retention
from zonegate.maintenance.splitting import HeadSplitter, build_split_objects, plan_split
from zonegate.maintenance.targets import RetentionRule, Target
from zonegate.metastore.models import PartitionInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.records.batch import iter_batches
from zonegate.records.build import build_batch
from zonegate.records.decode import decode_records
from zonegate.runtime.clock import ManualClock
from zonegate.storage.cleaner import clean_key, clean_mark
from zonegate.storage.index import IndexEntry
from zonegate.storage.log_cache import LogCache
from zonegate.storage.reader import StreamReader
from zonegate.storage.segments import Segment
from zonegate.storage.stream_objects import build_stream_object, is_stream_key

pytestmark = pytest.mark.unit

SEG_MS = 1_000
START_MS = 1_700_000_000_000  # a multiple of SEG_MS: segment windows start on the second


def _chunk(base: int, key: str) -> IndexEntry:
    return IndexEntry(base, base + 9, key, base * 10, 100, 0, 0)


def _seg(base: int, last: int) -> Segment:
    return Segment(base, last, 0, 0, 0)


def test_plan_splits_the_head_stream_object_by_segment() -> None:
    key = "streams/1/00000000000000000000-00000000000000000049-0-ab"
    entries = [_chunk(b, key) for b in (0, 10, 20, 30, 40)] + [_chunk(50, "streams/1/x")]
    segments = [_seg(0, 19), _seg(20, 29), _seg(30, 59)]
    runs = plan_split(entries, segments)
    # One run per segment, the next object's entries left out.
    assert [[e.base_offset for e in r] for r in runs] == [[0, 10], [20], [30, 40]]
    # The start inside the first entry (DeleteRecords): it still counts in the first segment.
    assert [[e.base_offset for e in r] for r in plan_split(entries, [_seg(5, 19), *segments[1:]])][
        0
    ] == [0, 10]
    # One segment: nothing to split; nor is a WAL object, nor nothing.
    assert plan_split(entries[:2], segments) == []
    assert plan_split([_chunk(0, "wal/n/1"), _chunk(10, "wal/n/1")], segments) == []
    assert plan_split([], segments) == []


def test_split_objects_keep_the_clean_mark() -> None:
    blob = build_batch([(b"k", b"v", (), 1000)])
    whole = build_stream_object(
        1, 0, [(IndexEntry(0, 0, "wal/a", 0, len(blob), 1000, 5), blob)], segment_ms=SEG_MS
    )
    marked = clean_key(whole.key, 123)
    entry = IndexEntry(0, 0, marked, 0, len(blob), 1000, 5)
    objs = build_split_objects(1, 0, [[(entry, blob)], [(entry, blob)]], segment_ms=SEG_MS)
    assert [clean_mark(o.key) for o in objs] == [(True, 123), (True, 123)]
    assert all(e.object_key == o.key for o in objs for e in o.entries)


def test_a_delete_topic_leaves_its_ranges_in_wal_objects_for_the_orphan_grace() -> None:
    """Rewritten sooner, a range would be stored twice until its WAL object may go; a
    compacted topic's ranges still move at segment.ms (its cleaning waits for them)."""
    tail = [IndexEntry(i, i, f"wal/{i}", 0, 10, 0, 1_000) for i in range(3)]
    settings = CompactionSettings(
        stream_object_bytes=1 << 20, max_delay_ms=60_000, wal_hold_ms=5_000
    )
    delete_only = Target(1, SEG_MS, 1 << 30)
    assert plan(tail, 1_000 + 4_999, delete_only, settings) == []
    assert plan(tail, 1_000 + 5_000, delete_only, settings) == [tail]
    from zonegate.storage.cleaner import CleanerConfig

    compacted = Target(1, SEG_MS, 1 << 30, CleanerConfig())
    assert plan(tail, 1_000 + SEG_MS, compacted, settings) == [tail]
    # The bound on data in WAL objects still wins over the grace.
    capped = CompactionSettings(stream_object_bytes=1 << 20, max_delay_ms=2_000, wal_hold_ms=5_000)
    assert plan(tail, 1_000 + 2_000, delete_only, capped) == [tail]


class _Rig:
    """One partition of a topic with 1 s segments and a 5.5 s retention, compacted into one
    stream object spanning its segments, then expired."""

    def __init__(self, tmp: Path) -> None:
        self.clock = ManualClock(wall_ms=START_MS)
        self.meta = SqliteMetaStore(str(tmp / "m.db"))
        self.store = MemoryStore()  # lists objects as written at 0: no orphan waits
        self.leader = LeaderService(self.meta, self.clock, lambda _sid: (SEG_MS, 1 << 30))
        self.reader = StreamReader(self.store, LogCache(0))
        self.part: PartitionInfo | None = None
        self.n = 0
        self.compactor = Compactor(
            self.leader.changes,
            self.store,
            self.reader.read,
            lambda: [Target(self.sid, SEG_MS, 1 << 30)],
            self.clock,
            CompactionSettings(stream_object_bytes=1 << 30, max_delay_ms=SEG_MS),
        )
        self.splitter = HeadSplitter(
            self.leader.changes, self.store, self.reader.read, lambda _sid: (SEG_MS, 1 << 30)
        )
        rule = RetentionRule(retention_ms=5_500, retention_bytes=-1)
        self.retention = Retention(
            lambda: [(self.partition, rule)],
            self.leader.changes,
            self.clock,
            split=self.splitter.split,
        )
        self.gc = ObjectGc(
            self.store,
            self.meta,
            self.clock,
            GcSettings(unreferenced_grace_ms=0, orphan_grace_ms=0),
        )

    @property
    def partition(self) -> PartitionInfo:
        assert self.part is not None
        return self.part

    @property
    def sid(self) -> int:
        return self.partition.stream_id

    async def setup(self) -> None:
        self.part = (await self.meta.create_topic("t", {}, [1])).partitions[0]

    async def produce_second(self, batches: int) -> None:
        """`batches` batches of 5 records, each in a WAL object of its own, appended now;
        then a second passes."""
        out = []
        for _ in range(batches):
            now = self.clock.wall_ms()
            blob = build_batch([(b"k", b"v%06d" % (self.n + j), (), now) for j in range(5)])
            key = f"wal/t/{self.n:08d}"
            await self.store.put(key, blob)
            out.append(AppendBatch(self.sid, ANY_EPOCH, key, 0, len(blob), 5, now, -1, -1, -1))
            self.n += 5
        assert all(r.error == 0 for r in await self.leader.append(out))
        await self.clock.advance(SEG_MS / 1000)

    async def stored(self) -> int:
        """Bytes of the objects in the store."""
        total = 0
        for prefix in ("wal/", "streams/"):
            total += sum(i.size for i in await self.store.list(prefix))
        return total

    async def retained(self) -> tuple[int, int]:
        """(bytes the index names, the largest segment's bytes)."""
        rows = await self.meta.read_index(self.sid)
        head = await self.leader.changes.head(self.sid)
        return sum(e.length for e in rows), max((s.bytes for s in head.segments), default=0)

    async def values(self) -> list[bytes]:
        out: list[bytes] = []
        offset, hwm, _ = await self.leader.offsets(self.sid)
        while offset < hwm:
            res = await self.leader.read_index(self.sid, offset, 1 << 20)
            assert res.error == 0 and res.entries
            for e, blob in zip(res.entries, await self.reader.read(res.entries), strict=True):
                assert is_stream_key(e.object_key)
                for pos, h in iter_batches(memoryview(blob)):
                    if h.base_offset >= offset:
                        out += [r.value or b"" for r in decode_records(blob[pos : pos + h.size])]
                offset = e.last_offset + 1
        return out


def test_retention_frees_a_compacted_partition_segment_by_segment(tmp_path: Path) -> None:
    async def run() -> None:
        rig = _Rig(tmp_path)
        await rig.setup()
        for _ in range(6):  # six segments, 0 s to 5 s
            await rig.produce_second(20)
        await rig.compactor.run_once()  # at 6 s the tail waited its max delay: compacted
        rows = await rig.meta.read_index(rig.sid)
        assert len({e.object_key for e in rows}) == 1  # one object spans the six segments
        await rig.gc.run_once()  # the WAL objects go
        assert await rig.stored() == (await rig.retained())[0]

        # 5.5 s of retention at 6 s: the first segment (second 0) expired.
        await rig.retention.run_once()
        assert rig.retention.stats.segments_deleted == 1
        # One retention check: the rest of the object is now one object per segment.
        rows = await rig.meta.read_index(rig.sid)
        assert len({e.object_key for e in rows}) == 5
        assert rig.splitter.stats.objects_split == 1
        # One GC pass: the bucket holds what retention keeps, no more.
        await rig.gc.run_once()
        retained, _ = await rig.retained()
        assert await rig.stored() == retained
        assert await rig.values() == [b"v%06d" % i for i in range(100, 600)]

        # Each later segment that expires frees its own object at once.
        for dropped in range(2, 7):
            await rig.clock.advance(1.0)
            await rig.retention.run_once()
            assert rig.retention.stats.segments_deleted == dropped
            await rig.gc.run_once()
            retained, _ = await rig.retained()
            assert await rig.stored() == retained
            assert rig.splitter.stats.objects_split == 1  # pieces are never split again
        assert retained == 0
        await rig.meta.close()

    asyncio.run(run())


def test_without_splitting_the_object_stays_until_all_of_it_expired(tmp_path: Path) -> None:
    """The rule's reason: left whole, the object outlives its first segments' retention."""

    async def run() -> None:
        rig = _Rig(tmp_path)
        rig.retention = Retention(
            lambda: [(rig.partition, RetentionRule(5_500, -1))], rig.leader.changes, rig.clock
        )
        await rig.setup()
        for _ in range(6):
            await rig.produce_second(20)
        await rig.compactor.run_once()
        await rig.gc.run_once()
        whole = await rig.stored()
        await rig.clock.advance(4.0)  # at 10 s five of the six segments expired
        await rig.retention.run_once()
        await rig.gc.run_once()
        retained, segment = await rig.retained()
        assert retained == segment and await rig.stored() == whole > 5 * segment
        await rig.meta.close()

    asyncio.run(run())
