"""Object GC on a manual clock, over a real SQLite index store: graces, pack files,
orphans, usage records, and a pass interrupted around its deletes (docs/storage.md)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.storage.fakes import MemoryStore
from zonegate.maintenance.gc import GcSettings, ObjectGc
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock
from zonegate.storage import pack_files
from zonegate.storage.index import IndexEntry, PartitionCommit
from zonegate.storage.objects import DeletionUnit, ObjectInfo
from zonegate.storage.store_url import open_object_store

pytestmark = pytest.mark.integration

GRACE, ORPHAN = 60_000, 600_000


class DatedStore(MemoryStore):
    """MemoryStore whose listing says when each object was written (the manual clock)."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.written: dict[str, int] = {}
        self.deleted: list[str] = []

    async def put(self, key: str, data: bytes) -> None:
        await super().put(key, data)
        self.written[key] = self.clock.wall_ms()

    def deletion_unit(self, key: str) -> DeletionUnit:
        return pack_files.deletion_unit(key)  # keys of pack files' objects as on disk

    async def list(self, prefix: str) -> list[ObjectInfo]:
        return [
            ObjectInfo(i.key, i.size, self.written.get(self.deletion_unit(i.key).key, 0))
            for i in await super().list(prefix)
        ]

    async def delete_many(self, keys: object) -> None:
        keys = list(keys)  # type: ignore[call-overload]
        self.deleted += keys
        for k in keys:
            for name in [n for n in self.objects if self.deletion_unit(n).key == k]:
                del self.objects[name]


def _run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_unreferenced_objects_go_after_the_grace_and_only_then(tmp_path: Path) -> None:
    async def body() -> None:
        clock = ManualClock()
        store = DatedStore(clock)
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        t = await meta.create_topic("t", {}, [1])
        sid = t.partitions[0].stream_id
        for name in ("wal/1/a", "wal/1/b", "wal/1/orphan"):
            await store.put(name, b"x" * 10)
        await store.put("wal/1/p.pack@8+5", b"y" * 5)  # two objects of one pack file
        store.objects["wal/1/p.pack@21+5"] = b"z" * 5
        entries = (
            IndexEntry(0, 0, "wal/1/a", 0, 10, 0),
            IndexEntry(1, 1, "wal/1/b", 0, 10, 0),
            IndexEntry(2, 2, "wal/1/p.pack@21+5", 0, 5, 0),
        )
        await meta.commit_appends([PartitionCommit(sid, 0, 3, entries, ())])
        gc = ObjectGc(store, meta, clock, GcSettings(GRACE, ORPHAN))

        await gc.run_once()
        assert store.deleted == [] and gc.stats.pending_objects == 1  # the orphan
        await clock.advance(ORPHAN / 1000)
        await gc.run_once()
        assert store.deleted == ["wal/1/orphan"]  # unreferenced for the grace, and old

        # Retention moves past a and the pack's named object: both become unreferenced.
        await meta.truncate_head(sid, 0, 1)
        await gc.run_once()
        assert store.deleted == ["wal/1/orphan"], "first seen now: the grace starts"
        await clock.advance(GRACE / 1000 - 1)
        await gc.run_once()
        assert store.deleted == ["wal/1/orphan"]
        await clock.advance(1)
        await gc.run_once()
        assert sorted(store.deleted) == ["wal/1/a", "wal/1/orphan"]
        assert "wal/1/b" in store.objects and "wal/1/p.pack@21+5" in store.objects
        await meta.truncate_head(sid, 0, 3)
        await gc.run_once()
        await clock.advance(GRACE / 1000)
        await gc.run_once()
        assert sorted(store.deleted) == ["wal/1/a", "wal/1/b", "wal/1/orphan", "wal/1/p.pack"]
        assert store.objects == {}
        assert await meta.gc_pending() == {}
        assert gc.stats.deleted_objects == 4
        await meta.close()

    _run(body())


def test_an_object_committed_after_it_was_seen_unreferenced_is_kept(tmp_path: Path) -> None:
    async def body() -> None:
        clock = ManualClock()
        store = DatedStore(clock)
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [1])).partitions[0].stream_id
        await store.put("wal/1/late", b"x")
        gc = ObjectGc(store, meta, clock, GcSettings(GRACE, 0))
        await gc.run_once()  # its Append is still on its way: seen unreferenced
        assert set(await meta.gc_pending()) == {"wal/1/late"}
        await meta.commit_appends(
            [PartitionCommit(sid, 0, 1, (IndexEntry(0, 0, "wal/1/late", 0, 1, 0),), ())]
        )
        await clock.advance(GRACE / 1000)
        await gc.run_once()  # past the grace, but named now: kept, and its row dropped
        assert store.deleted == [] and await meta.gc_pending() == {}
        await meta.close()

    _run(body())


def test_a_local_pack_file_goes_whole_once_none_of_its_objects_is_named(tmp_path: Path) -> None:
    """Over the real local store: GC learns the unit from the store, and a pending row
    as the earlier version wrote it (the pack file's key) is the same unit."""

    async def body() -> None:
        # Long after the pack file's mtime, so only the unreferenced grace counts.
        clock = ManualClock(wall_ms=int(time.time() * 1000) + 86_400_000)
        store = open_object_store((tmp_path / "objects").as_uri())
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [1])).partitions[0].stream_id
        keys = [await store.put_new(f"wal/1/{i:012d}-ab", b"x" * 10) for i in range(3)]
        (pack,) = {store.deletion_unit(k).key for k in keys}
        await store.put("wal/1/loose", b"y")
        entries = (IndexEntry(0, 0, keys[1], 0, 10, 0), IndexEntry(1, 1, "wal/1/loose", 0, 1, 0))
        await meta.commit_appends([PartitionCommit(sid, 0, 2, entries, ())])
        await meta.update_gc_pending({pack: (clock.wall_ms(), 30)}, [])
        gc = ObjectGc(store, meta, clock, GcSettings(GRACE, ORPHAN))
        await gc.run_once()  # one named object keeps the whole file, and drops the row
        assert [await store.get(k) for k in keys] == [b"x" * 10] * 3
        assert await meta.gc_pending() == {}
        await meta.truncate_head(sid, 0, 1)  # the pack's only named object goes
        await gc.run_once()
        assert set(await meta.gc_pending()) == {pack}
        await clock.advance(GRACE / 1000)
        await gc.run_once()
        assert [i.key for i in await store.list("wal/")] == ["wal/1/loose"]
        assert not (tmp_path / "objects" / pack).exists()
        assert await meta.gc_pending() == {} and gc.stats.deleted_objects == 1
        await store.close()
        await meta.close()

    _run(body())


def test_usage_records_past_their_retention_go(tmp_path: Path) -> None:
    async def body() -> None:
        clock = ManualClock(wall_ms=1_700_000_000_000)  # 2023-11-14
        store = DatedStore(clock)
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        for day in ("2023-10-01", "2023-11-13", "2023-11-14"):
            await store.put(f"usage/date={day}/node=1/x.parquet", b"u")
        gc = ObjectGc(store, meta, clock, GcSettings(usage_retention_ms=7 * 86_400_000))
        await gc.run_once()
        assert store.deleted == ["usage/date=2023-10-01/node=1/x.parquet"]
        assert gc.stats.stored["usage"] == (2, 2)
        await meta.close()

    _run(body())


class _Interrupted(Exception):
    pass


@pytest.mark.parametrize("when", ["before-delete", "after-delete"])
def test_a_pass_interrupted_around_its_deletes_is_finished_by_the_next(
    tmp_path: Path, when: str
) -> None:
    """A pass that dies before or after its DeleteObjects (as kill -9 there would: the
    pending rows are written after the deletes) leaves nothing the next pass cannot
    finish: nothing referenced is deleted, nothing unreferenced is left, no row stays."""

    class Dying(DatedStore):
        die = True

        async def delete_many(self, keys: object) -> None:
            if self.die and when == "before-delete":
                raise _Interrupted
            await super().delete_many(keys)
            if self.die:
                raise _Interrupted

    async def body() -> None:
        clock = ManualClock()
        store = Dying(clock)
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [1])).partitions[0].stream_id
        for name in ("wal/1/a", "wal/1/b", "wal/1/c"):
            await store.put(name, b"x")
        entries = tuple(IndexEntry(i, i, f"wal/1/{n}", 0, 1, 0) for i, n in enumerate("abc"))
        await meta.commit_appends([PartitionCommit(sid, 0, 3, entries, ())])
        await meta.truncate_head(sid, 0, 2)  # a and b unreferenced
        gc = ObjectGc(store, meta, clock, GcSettings(0, 0))
        with pytest.raises(_Interrupted):
            await gc.run_once()
        expected_left = (
            {"wal/1/a", "wal/1/b", "wal/1/c"} if when == "before-delete" else {"wal/1/c"}
        )
        assert set(store.objects) == expected_left
        store.die = False
        await ObjectGc(store, meta, clock, GcSettings(0, 0)).run_once()  # the restarted node
        assert set(store.objects) == {"wal/1/c"}
        assert await meta.gc_pending() == {}
        assert [e.object_key for e in await meta.read_index(sid)] == ["wal/1/c"]
        await meta.close()

    _run(body())


def test_a_stream_object_seen_named_goes_after_the_delete_delay_alone(tmp_path: Path) -> None:
    """Split by retention or written by compaction moments ago: once a pass saw it named,
    an unreferenced stream object waits its delete delay, not the orphan grace; a WAL
    object, and a stream object no pass saw named, still wait the orphan grace."""

    async def body() -> None:
        clock = ManualClock()
        store = DatedStore(clock)
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        sid = (await meta.create_topic("t", {}, [1])).partitions[0].stream_id
        for name in ("streams/1/seen", "streams/1/unseen", "wal/1/w"):
            await store.put(name, b"x" * 10)
        entries = (
            IndexEntry(0, 0, "streams/1/seen", 0, 10, 0),
            IndexEntry(1, 1, "wal/1/w", 0, 10, 0),
        )
        await meta.commit_appends([PartitionCommit(sid, 0, 2, entries, ())])
        gc = ObjectGc(store, meta, clock, GcSettings(GRACE, ORPHAN))
        await gc.run_once()  # sees "seen" and the WAL object named
        await meta.truncate_head(sid, 0, 2)
        await gc.run_once()
        await clock.advance(GRACE / 1000)
        await gc.run_once()
        assert store.deleted == ["streams/1/seen"]
        await clock.advance((ORPHAN - GRACE) / 1000)
        await gc.run_once()
        assert sorted(store.deleted) == ["streams/1/seen", "streams/1/unseen", "wal/1/w"]
        await meta.close()

    _run(body())
