"""Stream objects: batches with final offsets, indexed by chunks cut by size and by
segment window (docs/storage.md, "Part 2")."""

from __future__ import annotations

import pytest

from zonegate.records.batch import iter_batches, validate_batches
from zonegate.records.build import build_batch
from zonegate.storage.index import IndexEntry
from zonegate.storage.stream_objects import (
    batches_of,
    build_stream_object,
    is_stream_key,
)

pytestmark = pytest.mark.unit


def _wal_parts(sizes: list[int], append: list[int]) -> list[tuple[IndexEntry, bytes]]:
    """WAL entries of `n` records each (batches as producers send them: base offset 0)."""
    parts = []
    offset = 0
    for i, (n, at) in enumerate(zip(sizes, append, strict=True)):
        blob = build_batch([(None, b"v" * 100, (), 1000 + offset + j) for j in range(n)])
        e = IndexEntry(
            offset, offset + n - 1, f"wal/1/{i}", 0, len(blob), 1000 + offset + n - 1, at
        )
        parts.append((e, blob))
        offset += n
    return parts


def test_batches_get_their_final_offsets_and_chunks_cover_them_in_order() -> None:
    parts = _wal_parts([3, 2, 4, 1], [5000, 5000, 5000, 5000])
    obj = build_stream_object(7, 2, parts, segment_ms=60_000)
    assert is_stream_key(obj.key) and obj.key.startswith("streams/7/")
    assert "00000000000000000000-00000000000000000009-2-" in obj.key
    # The batches are valid as stored (CRC untouched) and carry their offsets.
    headers = validate_batches(obj.data)
    assert [(h.base_offset, h.base_offset + h.last_offset_delta) for h in headers] == [
        (0, 2),
        (3, 4),
        (5, 8),
        (9, 9),
    ]
    (chunk,) = obj.entries  # all of it fits in one chunk
    assert (chunk.base_offset, chunk.last_offset, chunk.position, chunk.length) == (
        0,
        9,
        0,
        len(obj.data),
    )
    assert chunk.max_timestamp == 1009 and chunk.object_key == obj.key


def test_chunks_are_cut_by_size_and_by_segment_window() -> None:
    parts = _wal_parts([2, 2, 2, 2], [1000, 1500, 2100, 2200])
    size = parts[0][1].__len__()
    obj = build_stream_object(1, 0, parts, segment_ms=1000, chunk_bytes=size * 10)
    # Windows of 1000 ms: [1000, 1500] and [2100, 2200].
    assert [(c.base_offset, c.last_offset, c.append_ms) for c in obj.entries] == [
        (0, 3, 1000),
        (4, 7, 2100),
    ]
    obj = build_stream_object(1, 0, parts, segment_ms=10**9, chunk_bytes=size * 2 + 1)
    assert [(c.base_offset, c.last_offset) for c in obj.entries] == [(0, 3), (4, 7)]
    # A chunk's bytes are exactly its batches.
    for c in obj.entries:
        blob = obj.data[c.position : c.position + c.length]
        assert [h.base_offset for _, h in iter_batches(blob)][0] == c.base_offset


def test_a_chunk_rewritten_keeps_its_batches() -> None:
    """Compacting stream objects again (cleaning, merging) reads chunks: their batches
    are final already and pass through unchanged."""
    first = build_stream_object(1, 0, _wal_parts([2, 3], [0, 0]), segment_ms=10**9)
    (chunk,) = first.entries
    again = list(batches_of(chunk, first.data))
    assert [(b, last) for b, last, _, _ in again] == [(0, 1), (2, 4)]
    second = build_stream_object(1, 1, [(chunk, first.data)], segment_ms=10**9)
    assert second.data == first.data and second.key != first.key
