"""The block cache and readahead over stream objects, on the real local store (and once on
moto's S3 server): one ranged GET per miss reads ahead, every block is cached, and a
catch-up reader fetching 1 MiB at a time takes at most one GET per 8 MiB."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from tests.storage.fakes import run
from zonegate.records.batch import iter_batches
from zonegate.records.build import build_batch
from zonegate.runtime.io_class import io_class
from zonegate.storage.block_cache import BLOCK_BYTES, BlockCache, blocks_of
from zonegate.storage.index import IndexEntry
from zonegate.storage.instrumented import InstrumentedObjectStore
from zonegate.storage.log_cache import LogCache
from zonegate.storage.reader import StreamReader
from zonegate.storage.store_url import open_object_store
from zonegate.storage.stream_objects import StreamObject, build_stream_object

MiB = 1 << 20


def _stream_object(first_offset: int, batches: int, value_bytes: int = 60_000) -> StreamObject:
    """A stream object of `batches` batches of two records, built as the compactor builds
    them (from WAL entries with producers' base offsets)."""
    parts = []
    offset = first_offset
    for i in range(batches):
        blob = build_batch(
            [(None, bytes([i % 251]) * value_bytes, (), 1_000 + offset + j) for j in range(2)]
        )
        e = IndexEntry(offset, offset + 1, f"wal/1/{i}", 0, len(blob), 1_001 + offset, 5_000)
        parts.append((e, blob))
        offset += 2
    return build_stream_object(3, 1, parts, segment_ms=10**9)


def _from_offset(entries: list[IndexEntry], offset: int, max_bytes: int) -> list[IndexEntry]:
    """The chunk holding `offset` and those after it, within `max_bytes` (at least one):
    what the partition's leader answers a ReadIndex with."""
    out: list[IndexEntry] = []
    for e in entries:
        if e.last_offset < offset:
            continue
        if out and sum(x.length for x in out) + e.length > max_bytes:
            break
        out.append(e)
    return out


def _local(tmp_path: Path) -> InstrumentedObjectStore:
    return open_object_store((tmp_path / "objects").as_uri())


def _catch_up_gets(store: InstrumentedObjectStore) -> int:
    counts = store.by_class.get(("get", "catch_up_fetch"))
    return 0 if counts is None else counts.requests


@pytest.mark.unit
def test_blocks_are_evicted_oldest_first_within_the_byte_bound() -> None:
    cache = BlockCache(3 * 100, block_bytes=100)
    for n in range(3):
        cache.put("k", n, bytes([n]) * 100)
    assert cache.get("k", 0) == bytes(100)  # now the youngest
    cache.put("k", 3, b"\x03" * 100)
    assert ("k", 1) not in cache and ("k", 0) in cache and cache.size_bytes == 300
    assert cache.get("k", 1) is None
    assert (cache.hits, cache.misses) == (1, 1)
    blocks = blocks_of(200, b"a" * 150, 100)  # a short last block: the object's end
    assert {n: len(b) for n, b in blocks.items()} == {2: 100, 3: 50}
    with pytest.raises(ValueError):
        blocks_of(150, b"x", 100)
    BlockCache(0).put("k", 0, b"x")  # a cache of no bytes holds nothing, and says nothing


@pytest.mark.unit
def test_a_miss_reads_ahead_in_one_get_and_every_block_is_cached(tmp_path: Path) -> None:
    obj = _stream_object(0, 250)  # about 30 MiB, 29 chunks
    store = _local(tmp_path)
    reader = StreamReader(store, LogCache(0), block_cache=BlockCache(64 * MiB))

    async def body() -> None:
        await store.put(obj.key, obj.data)
        first = obj.entries[0]
        (blob,), gets = await reader.read_prefix([first], 16, fetch=True)
        assert gets == 1 and blob == obj.data[: first.length]
        # The needed block and 16 MiB past it, in one GET, all cached.
        assert store.by_class[("get", "catch_up_fetch")].bytes == 17 * MiB
        assert len(reader.block_cache) == 17
        within = [e for e in obj.entries if e.position + e.length <= 17 * MiB]
        blobs, gets = await reader.read_prefix(within, 16, fetch=True)
        assert gets == 0 and len(within) >= 16
        assert blobs == [obj.data[e.position : e.position + e.length] for e in within]
        # A point lookup (ListOffsets by time) reads no more than the blocks it needs.
        last = obj.entries[-1]
        (blob,) = await reader.read([last], fetch=True, readahead=False)
        assert blob == obj.data[last.position :]
        needed = -(-(last.position + last.length) // MiB) - last.position // MiB
        assert store.by_class[("get", "catch_up_fetch")].bytes <= 17 * MiB + needed * MiB
        await store.close()

    run(body())


@pytest.mark.unit
def test_a_catch_up_reader_takes_at_most_one_get_per_8_mib(tmp_path: Path) -> None:
    """Stream objects as compaction writes them (16 MiB and a bit, and what is left),
    read from the start 1 MiB per Fetch with cold caches."""
    objects = [_stream_object(0, 140), _stream_object(280, 140), _stream_object(560, 60)]
    entries = [e for o in objects for e in o.entries]
    store = _local(tmp_path)
    reader = StreamReader(store, LogCache(1 << 30), block_cache=BlockCache(256 * MiB))

    async def body() -> None:
        for o in objects:
            await store.put(o.key, o.data)
        offset, read, fetches = 0, 0, 0
        while offset <= entries[-1].last_offset:
            want = _from_offset(entries, offset, MiB)
            blobs, _ = await reader.read_prefix(want, 16, fetch=True)
            for blob in blobs:
                for _, h in iter_batches(blob):
                    assert h.base_offset == offset  # every batch once, in order
                    offset = h.base_offset + h.last_offset_delta + 1
                read += len(blob)
            fetches += 1
        total = sum(len(o.data) for o in objects)
        assert read == total and fetches >= total // MiB
        gets = _catch_up_gets(store)
        # One GET per object: 16 MiB and a bit, twice, and the last (about 7 MiB).
        assert gets == 3 <= math.ceil(total / (8 * MiB)), (gets, total / MiB)
        assert store.stats().get_bytes == total  # nothing read twice
        await store.close()

    run(body())


@pytest.mark.unit
def test_gets_are_counted_by_the_class_of_what_they_read(tmp_path: Path) -> None:
    obj = _stream_object(0, 4)
    wal = build_batch([(None, b"v", (), 1)])
    store = _local(tmp_path)
    reader = StreamReader(store, LogCache(0), block_cache=BlockCache(0))

    async def body() -> None:
        await store.put(obj.key, obj.data)
        await store.put("wal/1/x", wal)
        wal_entry = IndexEntry(8, 8, "wal/1/x", 0, len(wal), 1)
        await reader.read([*obj.entries, wal_entry], fetch=True)
        with io_class("compaction"):
            await reader.read([wal_entry])  # the caller's class stands
        classes = {k: v.requests for k, v in store.by_class.items() if k[0] == "get"}
        assert classes == {
            ("get", "catch_up_fetch"): 1,
            ("get", "tail_fetch"): 1,
            ("get", "compaction"): 1,
        }
        assert store.by_class[("put", "housekeeping")].requests == 2
        await store.close()

    run(body())


@pytest.mark.unit
def test_a_read_that_would_exceed_its_get_budget_stops_before_the_miss(tmp_path: Path) -> None:
    objects = [_stream_object(0, 10), _stream_object(20, 10), _stream_object(40, 10)]
    store = _local(tmp_path)
    reader = StreamReader(store, LogCache(0), block_cache=BlockCache(64 * MiB))

    async def body() -> None:
        for o in objects:
            await store.put(o.key, o.data)
        entries = [e for o in objects for e in o.entries]
        blobs, gets = await reader.read_prefix(entries, 2, fetch=True)
        assert gets == 2  # the first two objects' chunks, whole; none of the third
        assert b"".join(blobs) == objects[0].data + objects[1].data
        # A tiny cache still answers the read it was made for, from the GET itself.
        small = StreamReader(store, LogCache(0), block_cache=BlockCache(BLOCK_BYTES // 2))
        assert b"".join(await small.read(entries)) == b"".join(o.data for o in objects)
        await store.close()

    run(body())


@pytest.mark.unit
def test_readers_missing_the_same_blocks_at_once_share_one_get(tmp_path: Path) -> None:
    """Two consumers at the same place of a partition (or a consumer whose client went
    away mid-read) cost one GET, and its blocks are cached whoever waits for them."""
    obj = _stream_object(0, 30)
    store = _local(tmp_path)
    reader = StreamReader(store, LogCache(0), block_cache=BlockCache(64 * MiB))
    chunk = obj.entries[1]
    want = obj.data[chunk.position : chunk.position + chunk.length]

    async def body() -> None:
        await store.put(obj.key, obj.data)
        (a, gets_a), (b, gets_b) = await asyncio.gather(
            reader.read_prefix([chunk], 16, fetch=True),
            reader.read_prefix([chunk], 16, fetch=True),
        )
        assert a == b == [want] and sorted([gets_a, gets_b]) == [0, 1]
        assert _catch_up_gets(store) == 1
        reader.block_cache.clear()
        gone = asyncio.ensure_future(reader.read([chunk], fetch=True))
        await asyncio.sleep(0)  # it planned and started its GET
        gone.cancel()
        assert await reader.read([chunk], fetch=True) == [want]
        assert _catch_up_gets(store) == 2 and len(reader.block_cache) > 1
        # A GET that fails fails its readers, and the next read asks again.
        reader.block_cache.clear()
        store.inject_fault("get_range", PermissionError("denied"))
        with pytest.raises(PermissionError):
            await reader.read([chunk], fetch=True)
        assert await reader.read([chunk], fetch=True) == [want]
        await store.close()

    run(body())


@pytest.mark.integration
def test_readahead_past_the_end_of_an_object_on_s3(s3_endpoint: str, s3_bucket: str) -> None:
    """On S3 a readahead beyond the object's end is a short read (and one starting past it
    an empty one): the tail of an object costs no second GET."""
    obj = _stream_object(0, 30)  # about 3.6 MiB: its last block is short
    store = open_object_store(f"s3://{s3_bucket}/t", endpoint_url=s3_endpoint)
    reader = StreamReader(store, LogCache(0), block_cache=BlockCache(64 * MiB))

    async def body() -> None:
        await store.put(obj.key, obj.data)
        blobs, gets = await reader.read_prefix(list(obj.entries), 16, fetch=True)
        assert gets == 1 and b"".join(blobs) == obj.data
        assert len(reader.block_cache) == math.ceil(len(obj.data) / MiB)
        assert await store.get_range(obj.key, len(obj.data) + 10, MiB) == b""
        await store.close()

    run(body())
