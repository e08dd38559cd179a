"""StreamStore's range reads and the compaction swap (storage/index.py, docs/storage.md
"Part 2"): every backend runs them (conftest.py)."""

from __future__ import annotations

import pytest

from tests.metastore.backends import Stores
from zonegate.metastore.api import MetaStore
from zonegate.storage.index import IndexEntry, LeaderEpochFenced, PartitionCommit, UnknownStream


async def _partition(store: MetaStore, entries: list[IndexEntry]) -> int:
    sid = (await store.create_topic("t", {}, [1])).partitions[0].stream_id
    nxt = entries[-1].last_offset + 1
    await store.commit_appends([PartitionCommit(sid, 0, nxt, tuple(entries), ())])
    return sid


def _wal(base: int, last: int, ts: int) -> IndexEntry:
    return IndexEntry(base, last, f"wal/1/{base}", 0, 100, ts, 1000 + base)


ENTRIES = [_wal(0, 4, 50), _wal(5, 9, 70), _wal(10, 10, 60), _wal(20, 29, 90), _wal(30, 31, 90)]


async def test_read_entries_from_the_one_holding_the_offset(store: MetaStore) -> None:
    sid = await _partition(store, ENTRIES)
    assert await store.read_entries(sid, 0) == ENTRIES
    assert await store.read_entries(sid, 7) == ENTRIES[1:]  # 5-9 holds 7
    assert await store.read_entries(sid, 9, limit=2) == ENTRIES[1:3]
    # In a gap (11-19, as compacted topics have): the first entry after it.
    assert await store.read_entries(sid, 15) == ENTRIES[3:]
    assert await store.read_entries(sid, 32) == []
    assert await store.read_entries(sid, 3, to_offset=10) == ENTRIES[:3]
    assert await store.read_entries(sid + 1000, 0) == []


async def test_lookups_by_time_within_a_range(store: MetaStore) -> None:
    sid = await _partition(store, ENTRIES)
    assert await store.entries_at_time(sid, 60, 0, 31) == [
        ENTRIES[1],
        ENTRIES[2],
        ENTRIES[3],
        ENTRIES[4],
    ]
    assert await store.entries_at_time(sid, 60, 0, 31, limit=1) == [ENTRIES[1]]
    assert await store.entries_at_time(sid, 80, 0, 10) == []  # 20-29 is outside the range
    assert await store.entries_at_time(sid, 80, 10, 31) == ENTRIES[3:]
    # The largest timestamp; the first entry of those that have it.
    assert await store.newest_entry(sid, 0, 31) == ENTRIES[3]
    assert await store.newest_entry(sid, 0, 10) == ENTRIES[1]
    assert await store.newest_entry(sid, 40, 50) is None


async def test_replace_swaps_entries_for_their_rewrite(store: MetaStore) -> None:
    sid = await _partition(store, ENTRIES)
    chunk = IndexEntry(0, 10, "streams/1/x", 0, 300, 70, 1000)
    assert await store.replace_entries(sid, 0, ENTRIES[:3], [chunk]) is True
    assert await store.read_index(sid) == [chunk, *ENTRIES[3:]]
    assert await store.read_entries(sid, 7) == [chunk, *ENTRIES[3:]]
    units = dict.fromkeys(["wal/1/0", "wal/1/5", "streams/1/x"])
    assert await store.referenced_units(units) == {"streams/1/x"}


async def test_replace_refused_when_retention_took_part_of_it(store: MetaStore) -> None:
    sid = await _partition(store, ENTRIES)
    assert await store.truncate_head(sid, 0, 5) == 5  # 0-4 went meanwhile
    chunk = IndexEntry(0, 10, "streams/1/x", 0, 300, 70, 1000)
    assert await store.replace_entries(sid, 0, ENTRIES[:3], [chunk]) is False
    assert await store.read_index(sid) == ENTRIES[1:]  # unchanged


async def test_replace_leaves_out_new_entries_below_the_log_start(store: MetaStore) -> None:
    sid = await _partition(store, ENTRIES)
    assert await store.truncate_head(sid, 0, 5) == 5
    chunks = [
        IndexEntry(5, 8, "streams/1/y", 0, 200, 70, 1000),
        IndexEntry(9, 10, "streams/1/y", 200, 100, 70, 1000),
    ]
    old = ENTRIES[1:3]
    assert await store.replace_entries(sid, 0, old, chunks) is True
    assert await store.read_index(sid) == [*chunks, *ENTRIES[3:]]
    # A chunk wholly below the start is not written: DeleteRecords moved past it.
    assert await store.truncate_head(sid, 0, 9) == 9
    again = [IndexEntry(9, 10, "streams/1/z", 0, 100, 70, 1000)]
    assert await store.replace_entries(sid, 0, [chunks[1]], again) is True
    assert await store.read_index(sid) == [*again, *ENTRIES[3:]]


async def test_replace_is_fenced_by_the_leader_epoch(stores: Stores) -> None:
    store = stores.open()
    sid = await _partition(store, ENTRIES)
    await store.move_partitions([(sid, 2)])  # epoch 1 now
    chunk = IndexEntry(0, 10, "streams/1/x", 0, 300, 70, 1000)
    with pytest.raises(LeaderEpochFenced):
        await store.replace_entries(sid, 0, ENTRIES[:3], [chunk])
    assert await store.read_index(sid) == ENTRIES
    assert await store.replace_entries(sid, 1, ENTRIES[:3], [chunk]) is True
    with pytest.raises(UnknownStream):
        await store.replace_entries(sid + 1000, 0, ENTRIES[:1], [chunk])
