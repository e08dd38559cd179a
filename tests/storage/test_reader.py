"""The stream reader: coalesced ranged GETs, a bounded number per read, a node-wide cap."""

from __future__ import annotations

import asyncio

import pytest

from tests.storage.fakes import MemoryStore, run
from zonegate.storage.index import IndexEntry
from zonegate.storage.log_cache import LogCache
from zonegate.storage.reader import StreamReader

pytestmark = pytest.mark.unit


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.ranges: list[tuple[str, int, int]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        self.ranges.append((key, start, length))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1
        return await super().get_range(key, start, length)


def _interleaved(store: CountingStore, objects: int, per_object: int) -> list[IndexEntry]:
    """One partition's 100-byte batches, every other 100 bytes of each object (the rest is
    another partition's), as a WAL object mixing partitions holds them."""
    entries = []
    offset = 0
    for o in range(objects):
        key = f"wal/{o:04d}"
        store.objects[key] = bytes([o % 256]) * (200 * per_object)
        for i in range(per_object):
            entries.append(IndexEntry(offset, offset, key, 200 * i, 100, 0))
            offset += 1
    return entries


def test_entries_of_one_object_share_a_get() -> None:
    store = CountingStore()
    entries = _interleaved(store, objects=3, per_object=50)
    blobs = run(StreamReader(store, LogCache(0)).read(entries))
    assert [len(b) for b in blobs] == [100] * 150
    assert [b[0] for b in blobs] == [i // 50 for i in range(150)]
    assert len(store.ranges) == 3  # not 150


def test_a_read_stops_at_its_get_budget_and_reads_a_prefix() -> None:
    store = CountingStore()
    entries = _interleaved(store, objects=1000, per_object=2)
    reader = StreamReader(store, LogCache(0))
    blobs, gets = run(reader.read_prefix(entries, 16))
    assert gets == 16 and len(store.ranges) == 16
    assert len(blobs) == 32  # the entries of the first 16 objects, in order
    assert all(b == bytes([i // 2]) * 100 for i, b in enumerate(blobs))


def test_cached_objects_take_no_get_and_do_not_count() -> None:
    store = CountingStore()
    entries = _interleaved(store, objects=40, per_object=1)
    cache = LogCache(1 << 20)
    for o in range(30):
        cache.put(f"wal/{o:04d}", store.objects[f"wal/{o:04d}"])
    blobs, gets = run(StreamReader(store, cache).read_prefix(entries, 4))
    assert (len(blobs), gets) == (34, 4)


def test_far_apart_entries_of_one_object_take_separate_gets() -> None:
    store = CountingStore()
    store.objects["big"] = bytes(4 * 1024 * 1024)
    entries = [IndexEntry(0, 0, "big", 0, 10, 0), IndexEntry(1, 1, "big", 3 * 1024 * 1024, 10, 0)]
    run(StreamReader(store, LogCache(0)).read(entries))
    assert [(s, n) for _, s, n in store.ranges] == [(0, 10), (3 * 1024 * 1024, 10)]


def test_gets_in_flight_are_capped_node_wide() -> None:
    store = CountingStore()
    entries = _interleaved(store, objects=200, per_object=1)
    reader = StreamReader(store, LogCache(0), max_gets_in_flight=8)

    async def many_readers() -> None:
        await asyncio.gather(*(reader.read(entries[i::10]) for i in range(10)))

    run(many_readers())
    assert len(store.ranges) == 200
    assert store.most_in_flight == 8
