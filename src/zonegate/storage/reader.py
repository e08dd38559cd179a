"""Reads stored batches by index entry: log cache first, then a bounded number of ranged GETs.

A consumer catching up on small batches asks for thousands of index entries
in one Fetch, spread over as many WAL objects. Each call reads a prefix of
the entries it is given, with at most `max_gets` GETs: entries of one object
share a GET when the bytes between them are fewer than `coalesce_gap` (a
short wasted read costs less than another request), and the first entry that
would need one GET too many ends the prefix; the caller answers with what was
read and the client asks again from there. GETs in flight on the whole node
are capped too, so many such readers queue instead of flooding the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from zonegate.storage.index import IndexEntry
from zonegate.storage.log_cache import LogCache
from zonegate.storage.objects import ObjectStore

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


class StreamReader:
    def __init__(
        self,
        store: ObjectStore,
        log_cache: LogCache,
        *,
        coalesce_gap: int = COALESCE_GAP,
        max_gets_in_flight: int = MAX_GETS_IN_FLIGHT,
    ) -> None:
        self._store = store
        self._cache = log_cache
        self._gap = coalesce_gap
        self._in_flight = asyncio.Semaphore(max_gets_in_flight)
        self.gets = 0
        self.gets_per_fetch = GetsPerFetch()

    async def read(self, entries: Sequence[IndexEntry]) -> list[bytes]:
        """The bytes of each entry, in order."""
        blobs, _ = await self.read_prefix(entries, None)
        return blobs

    async def read_prefix(
        self, entries: Sequence[IndexEntry], max_gets: int | None
    ) -> tuple[list[bytes], int]:
        """The bytes of each entry of the longest prefix of `entries` that takes at most
        `max_gets` GETs (all of them when None), in order, and the GETs it took. At least
        the first entry is read when `max_gets` is at least 1."""
        out: list[bytes | None] = []
        ranges: dict[str, list[_Range]] = {}
        planned: list[_Range] = []
        for i, e in enumerate(entries):
            cached = self._cache.get(e.object_key)
            if cached is not None:
                out.append(cached[e.position : e.position + e.length])
                continue
            r = self._join(ranges.get(e.object_key, ()), e)
            if r is None:
                if max_gets is not None and len(planned) >= max_gets:
                    break
                r = _Range(e.object_key, e.position, e.position + e.length)
                ranges.setdefault(e.object_key, []).append(r)
                planned.append(r)
            r.entries.append(i)
            out.append(None)
        if planned:
            blobs = await asyncio.gather(*(self._get(r) for r in planned))
            for r, blob in zip(planned, blobs, strict=True):
                for i in r.entries:
                    e = entries[i]
                    out[i] = blob[e.position - r.start : e.position - r.start + e.length]
        return [b for b in out if b is not None], len(planned)

    def _join(self, candidates: Sequence[_Range], e: IndexEntry) -> _Range | None:
        """A planned range of the same object that `e` can join, widened to hold it."""
        end = e.position + e.length
        for r in candidates:
            if e.position <= r.end + self._gap and end >= r.start - self._gap:
                r.start = min(r.start, e.position)
                r.end = max(r.end, end)
                return r
        return None

    async def _get(self, r: _Range) -> bytes:
        async with self._in_flight:
            self.gets += 1
            return await self._store.get_range(r.key, r.start, r.end - r.start)
