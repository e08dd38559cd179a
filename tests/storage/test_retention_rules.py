"""Segments drawn over a partition's index, and Kafka's retention rules over them."""

from __future__ import annotations

import pytest

from zonegate.maintenance.retention import retention_start
from zonegate.storage.index import IndexEntry, StreamIndex
from zonegate.storage.segments import Segment, SegmentSummary

pytestmark = pytest.mark.unit

NOW = 1_700_000_100_000


def _entries(*spec: tuple[int, int, int]) -> list[IndexEntry]:
    """Entries of two records each: (append time, max timestamp, bytes)."""
    return [
        IndexEntry(2 * i, 2 * i + 1, f"wal/{i}", 0, size, ts, at)
        for i, (at, ts, size) in enumerate(spec)
    ]


def _index(*spec: tuple[int, int, int]) -> StreamIndex:
    return StreamIndex(_entries(*spec))


class _Spec:
    """`_segments(...).segments(ms, bytes)`: the entries' segments under those configs."""

    def __init__(self, entries: list[IndexEntry]) -> None:
        self._entries = entries

    def segments(self, segment_ms: int, segment_bytes: int) -> list[Segment]:
        return SegmentSummary.of(self._entries, segment_ms, segment_bytes).segments


def _segments(*spec: tuple[int, int, int]) -> _Spec:
    return _Spec(_entries(*spec))


def test_segments_roll_by_time_and_by_size() -> None:
    idx = _segments(
        (1000, 1000, 10), (1400, 1500, 10), (2000, 2100, 10), (2100, 900, 50), (2150, 1, 5)
    )
    # segment.ms=1000: a new segment where an entry enters another 1000 ms window.
    assert [
        (s.base_offset, s.last_offset, s.bytes, s.max_timestamp) for s in idx.segments(1000, 10**9)
    ] == [
        (0, 3, 20, 1500),
        (4, 9, 65, 2100),
    ]
    # segment.bytes=30: a segment never passes 30 bytes (an entry alone may).
    assert [(s.base_offset, s.bytes) for s in idx.segments(10**9, 30)] == [(0, 30), (6, 50), (8, 5)]


def test_segments_of_partitions_end_at_the_same_instants() -> None:
    """Segments lie on a grid of segment.ms, whatever time each partition's first batch
    came: a WAL object written at one moment is in the same window for every partition
    whose batches it holds, so retention lets go of it in all of them together."""
    a = _segments((1100, 1100, 1), (1900, 1900, 1), (2100, 2100, 1), (2950, 2950, 1))
    b = _segments((1500, 1500, 1), (2200, 2200, 1), (2999, 2999, 1), (3000, 3000, 1))
    assert [(s.base_offset, s.last_offset) for s in a.segments(1000, 10**9)] == [(0, 3), (4, 7)]
    # Not [(0, 3), (4, 7)]: 2200 is in the window 2000-2999, as a's third entry is.
    assert [(s.base_offset, s.last_offset) for s in b.segments(1000, 10**9)] == [
        (0, 1),
        (2, 5),
        (6, 7),
    ]
    assert [s.max_timestamp for s in b.segments(1000, 10**9)] == [1500, 2999, 3000]


def test_entries_without_append_time_use_their_max_timestamp() -> None:
    idx = _segments((0, 1000, 1), (0, 1999, 1), (0, 2000, 1))
    assert [s.last_offset for s in idx.segments(1000, 10**9)] == [3, 5]


def test_retention_by_time_keeps_the_newest_and_can_take_all() -> None:
    idx = _segments(
        (NOW - 9000, NOW - 9000, 10), (NOW - 5000, NOW - 5000, 10), (NOW - 100, NOW - 100, 10)
    )
    segs = idx.segments(1000, 10**9)
    assert len(segs) == 3
    assert retention_start(segs, 6, NOW, 6000, -1) == 2  # the first only
    assert retention_start(segs, 6, NOW, 4000, -1) == 4
    assert retention_start(segs, 6, NOW, 50, -1) == 6  # all of them: the log end
    assert retention_start(segs, 6, NOW, 10_000, -1) is None
    assert retention_start(segs, 6, NOW, -1, -1) is None


def test_retention_by_size_keeps_at_least_the_limit() -> None:
    idx = _segments(*[(NOW - 10_000 + i * 2000, NOW, 100) for i in range(5)])
    segs = idx.segments(1000, 10**9)
    assert len(segs) == 5
    assert retention_start(segs, 10, NOW, -1, 250) == 4  # 300 bytes stay (>= 250)
    assert retention_start(segs, 10, NOW, -1, 300) == 4
    assert retention_start(segs, 10, NOW, -1, 301) == 2
    assert retention_start(segs, 10, NOW, -1, 0) == 10
    assert retention_start(segs, 10, NOW, -1, 10_000) is None


def test_drop_before_keeps_the_entry_holding_the_offset() -> None:
    idx = _index((1, 1, 1), (2, 2, 1), (3, 3, 1))
    assert idx.drop_before(3) == 1  # [0,1] goes, [2,3] holds offset 3
    assert idx.first_offset == 2
    assert idx.from_offset(3, 10**6)[0].base_offset == 2
    assert idx.drop_before(100) == 2 and len(idx) == 0


def test_the_summary_follows_appends_truncations_and_config_changes() -> None:
    entries = _entries((1000, 1000, 10), (1500, 1600, 10), (2100, 2100, 10), (2500, 900, 10))
    summary = SegmentSummary(1000, 10**9)
    for e in entries:  # one at a time, as commits come
        summary.extend([e])
    assert [(s.base_offset, s.last_offset, s.bytes) for s in summary.segments] == [
        (0, 3, 20),
        (4, 7, 20),
    ]
    assert summary.first_reaching(1500) is summary.segments[0]
    assert summary.first_reaching(2000) is summary.segments[1]
    assert summary.first_reaching(3000) is None
    assert summary.newest() is summary.segments[1]  # 2100
    assert summary.total_bytes == 40
    # A truncation inside a segment leaves it, starting later, for its bytes to be set.
    partial = summary.drop_before(2)
    assert partial is summary.segments[0] and partial.base_offset == 2
    assert summary.drop_before(4) is None and summary.segments[0].base_offset == 4
    # New configs apply to what comes next; rolled segments stay as they were.
    summary.configure(10**9, 15)
    summary.extend(_entries((2600, 3000, 10))[:1])
    assert len(summary.segments) == 2
