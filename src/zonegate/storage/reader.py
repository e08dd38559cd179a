"""Reads stored batches by index entry: log cache first, then a bounded number of ranged GETs.

A consumer catching up on small batches asks for thousands of index entries
in one Fetch, spread over as many WAL objects. Each call reads a prefix of
the entries it is given, with at most `max_gets` GETs: entries of one object
share a GET when the bytes between them are fewer than `coalesce_gap` (a
short wasted read costs less than another request), and the first entry that
would need one GET too many ends the prefix; the caller answers with what was
read and the client asks again from there. GETs in flight on the whole node
are capped too, so many such readers queue instead of flooding the store.

Entries of stream objects (`streams/` keys) are read through the block cache
(storage/block_cache.py) instead: a miss GETs from the first block missing to
`READAHEAD_BYTES` past the last block needed (or the object's end: a range
past the end is clipped, as S3 does), in one GET, and caches every block, so a
consumer reading 1 MiB per Fetch takes one GET per 9 MiB or so. Entries of WAL
objects go through the log cache and the coalesced GETs above.

A read for a Fetch or a ListOffsets (`fetch=True`) is classed by what it
reads (runtime/io_class.py): WAL objects hold the recent data (compaction
moves older ranges out of them), so their GETs are `tail_fetch`; stream
objects hold the older data, so theirs are `catch_up_fetch`. Other callers
(compaction, cleaning) read in the class they set.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from zonegate.runtime.io_class import io_class
from zonegate.storage.block_cache import READAHEAD_BYTES, BlockCache, blocks_of
from zonegate.storage.index import IndexEntry
from zonegate.storage.log_cache import LogCache
from zonegate.storage.objects import ObjectStore
from zonegate.storage.stream_objects import is_stream_key

# A GET costs a round trip (tens of ms on S3) and a request charge; reading up to
# this many unwanted bytes instead is cheaper.
COALESCE_GAP = 512 * 1024
MAX_GETS_PER_READ = 16
MAX_GETS_IN_FLIGHT = 32


@dataclass(slots=True)
class GetsPerFetch:
    """How many GETs each Fetch answer took: a histogram for /metrics."""

    BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64)
    counts: list[int] = field(default_factory=lambda: [0] * (len(GetsPerFetch.BUCKETS) + 1))
    total: int = 0
    most: int = 0

    def observe(self, gets: int) -> None:
        i = next((i for i, b in enumerate(self.BUCKETS) if gets <= b), len(self.BUCKETS))
        self.counts[i] += 1
        self.total += gets
        self.most = max(self.most, gets)


@dataclass(slots=True)
class _Range:
    key: str
    start: int
    end: int
    entries: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Load:
    """A GET of a stream object's blocks start..end, in flight or done: every read that
    needs one of its blocks meanwhile waits for it instead of a GET of its own. A task
    of its own, so a reader that goes away (its client did) does not cancel it for the
    others, and its blocks reach the cache all the same."""

    key: str
    start: int
    end: int
    task: asyncio.Task[bytes]
    _blocks: dict[int, bytes] | None = None

    def blocks(self, block_bytes: int) -> dict[int, bytes]:
        if self._blocks is None:
            self._blocks = blocks_of(self.start, self.task.result(), block_bytes)
        return self._blocks


class StreamReader:
    def __init__(
        self,
        store: ObjectStore,
        log_cache: LogCache,
        *,
        block_cache: BlockCache | None = None,
        readahead_bytes: int = READAHEAD_BYTES,
        coalesce_gap: int = COALESCE_GAP,
        max_gets_in_flight: int = MAX_GETS_IN_FLIGHT,
    ) -> None:
        self._store = store
        self._cache = log_cache
        self.block_cache = block_cache if block_cache is not None else BlockCache(0)
        self._readahead = readahead_bytes
        self._gap = coalesce_gap
        self._in_flight = asyncio.Semaphore(max_gets_in_flight)
        self._loading: dict[tuple[str, int], _Load] = {}  # (key, block) -> its GET
        self.gets = 0
        self.gets_per_fetch = GetsPerFetch()

    async def read(self, entries: Sequence[IndexEntry], *, fetch: bool = False) -> list[bytes]:
        """The bytes of each entry, in order."""
        blobs, _ = await self.read_prefix(entries, None, fetch=fetch)
        return blobs

    async def read_prefix(
        self, entries: Sequence[IndexEntry], max_gets: int | None, *, fetch: bool = False
    ) -> tuple[list[bytes], int]:
        """The bytes of each entry of the longest prefix of `entries` that takes at most
        `max_gets` GETs (all of them when None), in order, and the GETs it took. At least
        the first entry is read when `max_gets` is at least 1. `fetch`: the read serves a
        Fetch or ListOffsets, and its GETs are classed by the objects they read."""
        out: list[bytes | None] = []
        ranges: dict[str, list[_Range]] = {}
        planned: list[_Range] = []
        gets = 0
        # Blocks of stream objects this read uses, held from the cache when planned (so
        # that an eviction meanwhile loses nothing), and the GETs it waits for.
        blocks: dict[tuple[str, int], bytes] = {}
        loads: list[_Load] = []
        for i, e in enumerate(entries):
            if is_stream_key(e.object_key):
                r = self._plan_blocks(e, loads, blocks)
                if r is not None:  # a GET needed
                    if max_gets is not None and gets >= max_gets:
                        break
                    loads.append(self._start_load(r, fetch))
                    gets += 1
                out.append(None)
                continue
            cached = self._cache.get(e.object_key)
            if cached is not None:
                out.append(cached[e.position : e.position + e.length])
                continue
            r = self._join(ranges.get(e.object_key, ()), e)
            if r is None:
                if max_gets is not None and gets >= max_gets:
                    break
                r = _Range(e.object_key, e.position, e.position + e.length)
                ranges.setdefault(e.object_key, []).append(r)
                planned.append(r)
                gets += 1
            r.entries.append(i)
            out.append(None)
        if planned or loads:
            got = await asyncio.gather(
                *(self._get(r, fetch) for r in planned),
                *(asyncio.shield(load.task) for load in loads),
            )
            for r, blob in zip(planned, got, strict=False):
                for i in r.entries:
                    e = entries[i]
                    out[i] = blob[e.position - r.start : e.position - r.start + e.length]
            size = self.block_cache.block_bytes
            for load in loads:
                for n, block in load.blocks(size).items():
                    blocks.setdefault((load.key, n), block)
        for i, e in enumerate(entries[: len(out)]):
            if out[i] is None and is_stream_key(e.object_key):
                out[i] = self._assemble(e, blocks)
        return [b for b in out if b is not None], gets

    def _block_numbers(self, e: IndexEntry) -> range:
        size = self.block_cache.block_bytes
        return range(e.position // size, (e.position + max(e.length, 1) - 1) // size + 1)

    def _plan_blocks(
        self, e: IndexEntry, loads: list[_Load], blocks: dict[tuple[str, int], bytes]
    ) -> _Range | None:
        """How a stream object's entry is read: from the cache, or by joining GETs in
        flight (added to `loads`); None when that is all it needs, else the new GET it
        needs (started by the caller, if its GET budget allows): from the first block
        missing to the readahead past the last block needed."""
        key, cache, size = e.object_key, self.block_cache, self.block_cache.block_bytes
        missing = None
        for n in self._block_numbers(e):
            if (key, n) in blocks or any(
                x.key == key and x.start <= n * size < x.end for x in loads
            ):
                continue
            data = cache.get(key, n)
            if data is not None:
                blocks[(key, n)] = data
                continue
            load = self._loading.get((key, n))
            if load is not None:
                loads.append(load)
            elif missing is None:
                missing = n
        if missing is None:
            return None
        last = self._block_numbers(e)[-1]
        end = last + 1 + -(-self._readahead // size)
        # Readahead stops where blocks are held already, or on their way.
        for n in range(last + 1, end):
            if (key, n) in cache or (key, n) in self._loading:
                end = n
                break
        return _Range(key, missing * size, end * size)

    def _start_load(self, r: _Range, fetch: bool) -> _Load:
        load = _Load(r.key, r.start, r.end, asyncio.ensure_future(self._get(r, fetch)))
        size = self.block_cache.block_bytes
        numbers = range(r.start // size, -(-r.end // size))
        for n in numbers:
            self._loading[(r.key, n)] = load

        def done(task: asyncio.Task[bytes]) -> None:
            for n in numbers:
                if self._loading.get((r.key, n)) is load:
                    del self._loading[(r.key, n)]
            if not task.cancelled() and task.exception() is None:
                self.block_cache.put_blocks(r.key, load.blocks(size))

        load.task.add_done_callback(done)
        return load

    def _assemble(self, e: IndexEntry, blocks: dict[tuple[str, int], bytes]) -> bytes:
        size = self.block_cache.block_bytes
        numbers = self._block_numbers(e)
        skip = e.position - numbers[0] * size
        if len(numbers) == 1:
            block = blocks.get((e.object_key, numbers[0]), b"")
            return block[skip : skip + e.length]
        data = b"".join(blocks.get((e.object_key, n), b"") for n in numbers)
        return data[skip : skip + e.length]

    def _join(self, candidates: Sequence[_Range], e: IndexEntry) -> _Range | None:
        """A planned range of the same object that `e` can join, widened to hold it."""
        end = e.position + e.length
        for r in candidates:
            if e.position <= r.end + self._gap and end >= r.start - self._gap:
                r.start = min(r.start, e.position)
                r.end = max(r.end, end)
                return r
        return None

    async def _get(self, r: _Range, fetch: bool) -> bytes:
        async with self._in_flight:
            self.gets += 1
            with _fetch_class(r.key) if fetch else contextlib.nullcontext():
                return await self._store.get_range(r.key, r.start, r.end - r.start)


@contextlib.contextmanager
def _fetch_class(key: str) -> Iterator[None]:
    with io_class("catch_up_fetch" if is_stream_key(key) else "tail_fetch"):
        yield
