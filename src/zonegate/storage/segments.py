"""A partition's segments, as Kafka's retention sees them, kept as a summary.

zonegate has no segment files: segments are drawn over the index (docs/
storage.md, "Segments and retention"). Walking a partition's entries in
offset order, a new segment starts where an entry's append time enters
another `segment.ms` window of the clock (windows start at multiples of
`segment.ms`, so no segment spans more than `segment.ms`, and every
partition's segments end at the same instants: the WAL objects partitions
share are let go together), or where the segment's bytes would pass
`segment.bytes`. Entries with no append time (written before it was kept) use
their max timestamp.

The leader keeps only this summary of a partition in memory, a few segments,
not its entries (docs/storage.md, "The bounded index"): it follows appends and
truncations, it is what retention decides on (maintenance/retention.py), and
it tells a lookup by time which segment's entries to ask the store for.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from zonegate.storage.index import IndexEntry


@dataclass(slots=True)
class Segment:
    """A run of a partition's entries retention treats as one: Kafka's log segment."""

    base_offset: int
    last_offset: int
    bytes: int
    max_timestamp: int  # the largest record timestamp in it
    window: int  # the segment.ms window of its first entry's append time


class SegmentSummary:
    """A partition's segments in offset order, drawn with the segment configs in force
    when each entry came (as Kafka rolls a segment with the configs of its time)."""

    __slots__ = ("_bytes", "_ms", "segments")

    def __init__(self, segment_ms: int, segment_bytes: int) -> None:
        self._ms = max(segment_ms, 1)
        self._bytes = segment_bytes
        self.segments: list[Segment] = []

    @classmethod
    def of(
        cls, entries: Iterable[IndexEntry], segment_ms: int, segment_bytes: int
    ) -> SegmentSummary:
        summary = cls(segment_ms, segment_bytes)
        summary.extend(entries)
        return summary

    def configure(self, segment_ms: int, segment_bytes: int) -> None:
        """The configs the entries from now on are segmented by."""
        self._ms = max(segment_ms, 1)
        self._bytes = segment_bytes

    def extend(self, entries: Iterable[IndexEntry]) -> None:
        segs = self.segments
        for e in entries:
            window = e.window_ms // self._ms
            s = segs[-1] if segs else None
            if s is None or s.window != window or s.bytes + e.length > self._bytes:
                segs.append(
                    Segment(e.base_offset, e.last_offset, e.length, e.max_timestamp, window)
                )
                continue
            s.last_offset = e.last_offset
            s.bytes += e.length
            if e.max_timestamp > s.max_timestamp:
                s.max_timestamp = e.max_timestamp

    def drop_before(self, offset: int) -> Segment | None:
        """Drops the segments wholly below `offset`; returns the first one left if `offset`
        fell inside it (its bytes are then the caller's to correct: `set_bytes`)."""
        segs = self.segments
        n = 0
        while n < len(segs) and segs[n].last_offset < offset:
            n += 1
        del segs[:n]
        if segs and segs[0].base_offset < offset:
            segs[0].base_offset = offset
            return segs[0]
        return None

    def replace(self, old: Iterable[IndexEntry], new: Iterable[IndexEntry]) -> None:
        """Follows a swap of entries for their rewrite (key-based cleaning shrinks them):
        each segment's bytes, by the entries that start in it."""
        segs = self.segments
        bases = [s.base_offset for s in segs]
        for sign, entries in ((-1, old), (1, new)):
            for e in entries:
                i = bisect.bisect_right(bases, e.base_offset) - 1
                if i >= 0:
                    segs[i].bytes += sign * e.length

    def first_reaching(self, timestamp: int) -> Segment | None:
        """The first segment whose max timestamp reaches `timestamp`."""
        return next((s for s in self.segments if s.max_timestamp >= timestamp), None)

    def newest(self) -> Segment | None:
        """The segment holding the largest timestamp (the first such, on a tie)."""
        best: Segment | None = None
        for s in self.segments:
            if best is None or s.max_timestamp > best.max_timestamp:
                best = s
        return best

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.segments)
