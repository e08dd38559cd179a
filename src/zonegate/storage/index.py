"""A partition's stream: where its batches are, and the store that keeps that durable.

`IndexEntry` says where one stored batch (or run of batches) of a partition
lies: offsets, object key, position, length, max timestamp. `StreamIndex` is a
partition's entries in offset order with the lookups every reader needs (by
offset, by timestamp, the largest timestamp). `StreamStore` is what the
storage layer asks of a durable store for them (the metadata store implements
it): the partition's state, its entries, and the group commit that appends
entries and producer state in one transaction fenced by leader epoch.
Producer state rides in the same commit because idempotence must move exactly
with the offsets it vouches for.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One stored batch (or run of batches) of a partition's stream."""

    base_offset: int
    last_offset: int
    object_key: str
    position: int
    length: int
    max_timestamp: int
    # The leader's clock at the commit (ms); 0 for entries of a store made before it was
    # kept. Segments for retention are drawn by it (`StreamIndex.segments`).
    append_ms: int = 0


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: tuple[ProducerBatch, ...]  # the last five, oldest first

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    stream_id: int
    leader_epoch: int
    log_start_offset: int
    next_offset: int
    producers: dict[int, ProducerEntry]


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    """What one group commit appends to one partition, fenced by `leader_epoch`."""

    stream_id: int
    leader_epoch: int
    next_offset: int
    entries: tuple[IndexEntry, ...]
    producers: tuple[ProducerEntry, ...]


class UnknownStream(LookupError):
    """No partition has this stream id (never had, or its topic was deleted)."""

    def __init__(self, stream_id: int) -> None:
        super().__init__(f"no partition with stream id {stream_id}")
        self.stream_id = stream_id


class StreamStore(Protocol):
    """The durable side of partitions' streams (the metadata store implements it)."""

    async def load_partition(self, stream_id: int) -> PartitionState:
        """Raises UnknownStream for a stream id no partition has."""
        ...

    async def read_index(self, stream_id: int) -> list[IndexEntry]: ...

    async def epoch_end_offset(self, stream_id: int, epoch: int) -> tuple[int, int] | None:
        """Where leader epoch `epoch` of the stream ended, as Kafka's leader-epoch cache
        answers it: (the newest epoch at or before `epoch`, the first offset of the
        epoch after it); None when no later epoch began.

        Epoch 0 starts at offset 0 with the partition and is not recorded; every leader
        move records its new epoch and the offset it starts at.
        """
        ...

    async def commit_appends(self, commits: Sequence[PartitionCommit]) -> set[int]:
        """Commits all in one transaction; returns the stream ids fenced (epoch moved)."""
        ...

    async def truncate_head(self, stream_id: int, leader_epoch: int, log_start: int) -> int:
        """Moves the stream's log start offset up to `log_start` (never down) and deletes
        the entries wholly below it, in one transaction fenced by `leader_epoch`;
        returns the log start offset now. Raises UnknownStream for an unknown stream and
        LeaderEpochFenced when the epoch moved (nothing changed)."""
        ...


class GcStore(Protocol):
    """What object GC (storage/gc.py) asks of the index store (the metadata store
    implements it)."""

    async def referenced_units(self, units: Sequence[str]) -> set[str]:
        """Those of `units` some index entry names: the unit itself, or for a pack file
        one of its objects (`<pack>@<offset>+<length>`)."""
        ...

    async def gc_pending(self) -> dict[str, tuple[int, int]]:
        """Units seen unreferenced: unit -> (first seen, ms; size, bytes)."""
        ...

    async def update_gc_pending(
        self, add: dict[str, tuple[int, int]], remove: Iterable[str]
    ) -> None: ...


class LeaderEpochFenced(Exception):
    """A write named a leader epoch that is no longer the partition's: nothing changed."""

    def __init__(self, stream_id: int, expected: int, actual: int | None) -> None:
        super().__init__(f"stream {stream_id}: leader epoch {expected} is not current ({actual})")
        self.stream_id = stream_id


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of a partition's entries retention treats as one: Kafka's log segment."""

    first: int  # index of its first entry in the StreamIndex
    count: int
    base_offset: int
    last_offset: int
    bytes: int
    max_timestamp: int  # the largest record timestamp in it


class StreamIndex:
    """A partition's index entries in offset order, with the readers' lookups."""

    __slots__ = ("_bases", "_entries")

    def __init__(self, entries: Iterable[IndexEntry] = ()) -> None:
        self._entries: list[IndexEntry] = list(entries)
        self._bases = [e.base_offset for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def first_offset(self) -> int | None:
        return self._bases[0] if self._bases else None

    def extend(self, entries: Sequence[IndexEntry]) -> None:
        """Appends entries that follow the last one."""
        self._entries.extend(entries)
        self._bases.extend(e.base_offset for e in entries)

    def from_offset(self, offset: int, max_bytes: int) -> list[IndexEntry]:
        """Entries from the one holding `offset`, up to `max_bytes` (at least one)."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        out: list[IndexEntry] = []
        total = 0
        entries = self._entries
        while i < len(entries):
            e = entries[i]
            if out and total + e.length > max_bytes:
                break
            if e.last_offset >= offset:
                out.append(e)
                total += e.length
            i += 1
        return out

    def from_timestamp(self, timestamp: int) -> list[IndexEntry]:
        """Entries from the first whose max timestamp reaches `timestamp`, in offset order."""
        for i, e in enumerate(self._entries):
            if e.max_timestamp >= timestamp:
                return self._entries[i:]
        return []

    def max_timestamp_entry(self) -> IndexEntry | None:
        """The entry holding the largest timestamp (the first such, on a tie)."""
        best: IndexEntry | None = None
        for e in self._entries:
            if best is None or e.max_timestamp > best.max_timestamp:
                best = e
        return best

    def stored_bytes(self) -> int:
        return sum(e.length for e in self._entries)

    def drop_before(self, offset: int) -> int:
        """Drops the entries wholly below `offset`; how many it dropped."""
        n = 0
        while n < len(self._entries) and self._entries[n].last_offset < offset:
            n += 1
        if n:
            del self._entries[:n]
            del self._bases[:n]
        return n

    def segments(self, segment_ms: int, segment_bytes: int) -> list[Segment]:
        """The entries cut into segments as Kafka rolls them, by time and by size: a new
        one starts where an entry's append time enters another `segment_ms` window of
        the clock (windows start at multiples of `segment_ms`, so no segment spans more
        than `segment_ms`, and every partition's segments end at the same instants:
        the WAL objects partitions share are let go together), or where the segment's
        bytes would pass `segment_bytes`. Entries with no append time (written before
        it was kept) use their max timestamp."""
        out: list[Segment] = []
        start = 0
        window = 0
        size = 0
        max_ts = -1
        step = max(segment_ms, 1)
        for i, e in enumerate(self._entries):
            at = (e.append_ms or e.max_timestamp) // step
            if i > start and (at != window or size + e.length > segment_bytes):
                out.append(self._segment(start, i, size, max_ts))
                start, size, max_ts = i, 0, -1
            if i == start:
                window = at
            size += e.length
            max_ts = max(max_ts, e.max_timestamp)
        if start < len(self._entries):
            out.append(self._segment(start, len(self._entries), size, max_ts))
        return out

    def _segment(self, start: int, end: int, size: int, max_ts: int) -> Segment:
        first, last = self._entries[start], self._entries[end - 1]
        return Segment(start, end - start, first.base_offset, last.last_offset, size, max_ts)


def retention_start(
    segments: Sequence[Segment],
    log_end: int,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
) -> int | None:
    """Where the log should start after Kafka's retention over `segments` (oldest
    first): the oldest segments go while their newest record is older than
    `retention_ms`, then while the partition without them would still hold at least
    `retention_bytes`; -1 turns either rule off. None when nothing goes. All segments
    going moves the start to `log_end` (Kafka rolls and deletes the active segment)."""
    keep = 0
    if retention_ms >= 0:
        while keep < len(segments) and segments[keep].max_timestamp < now_ms - retention_ms:
            keep += 1
    if retention_bytes >= 0:
        left = sum(s.bytes for s in segments[keep:])
        while keep < len(segments) and left - segments[keep].bytes >= retention_bytes:
            left -= segments[keep].bytes
            keep += 1
    if keep == 0:
        return None
    return segments[keep].base_offset if keep < len(segments) else log_end
