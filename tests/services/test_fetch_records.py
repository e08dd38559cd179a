"""A Fetch answer's records from WAL entries and chunks of stream objects: batches below
the fetch offset left out, byte limits kept at batch boundaries, epochs patched."""

from __future__ import annotations

import pytest

from zonegate.records.batch import iter_batches
from zonegate.records.build import build_batch
from zonegate.services.read_path import records_for_fetch
from zonegate.storage.index import IndexEntry
from zonegate.storage.stream_objects import build_stream_object

pytestmark = pytest.mark.unit


def _wal(first: int, batches: int, per_batch: int = 3) -> list[tuple[IndexEntry, bytes]]:
    parts = []
    offset = first
    for i in range(batches):
        blob = build_batch([(None, b"x" * 50, (), 100 + offset + j) for j in range(per_batch)])
        last = offset + per_batch - 1
        parts.append((IndexEntry(offset, last, f"wal/1/{i}", 0, len(blob), 100 + last), blob))
        offset += per_batch
    return parts


def _batches(records: bytes) -> list[tuple[int, int, int]]:
    """(base offset, last offset, partition leader epoch) of each batch."""
    return [
        (h.base_offset, h.base_offset + h.last_offset_delta, h.partition_leader_epoch)
        for _, h in iter_batches(records)
    ]


def test_a_chunk_is_cut_at_batches_from_the_fetch_offset_within_the_budget() -> None:
    obj = build_stream_object(1, 0, _wal(0, 10), segment_ms=10**9)
    (chunk,) = obj.entries
    size = len(_wal(0, 1)[0][1])
    got = records_for_fetch([chunk], [obj.data], 7, 3 * size, 0, 5)
    # Offset 7 lies in the batch 6..8: the batches below it are left out, and three fit.
    assert _batches(got) == [(6, 8, 5), (9, 11, 5), (12, 14, 5)]
    # One batch at least for the first partition of the answer, none for a later one.
    assert _batches(records_for_fetch([chunk], [obj.data], 7, 10, 0, 5)) == [(6, 8, 5)]
    assert records_for_fetch([chunk], [obj.data], 7, 10, 1, 5) == b""


def test_wal_entries_get_their_offsets_and_mix_with_chunks() -> None:
    parts = _wal(0, 6)
    obj = build_stream_object(1, 0, parts[:4], segment_ms=10**9)
    tail = [
        (IndexEntry(12 + 3 * i, 14 + 3 * i, e.object_key, 0, e.length, 0), b)
        for i, (e, b) in enumerate(parts[4:])
    ]
    entries = [*obj.entries, *(e for e, _ in tail)]
    blobs = [obj.data, *(b for _, b in tail)]
    got = records_for_fetch(entries, blobs, 4, 1 << 20, 0, 2)
    assert _batches(got) == [(3, 5, 2), (6, 8, 2), (9, 11, 2), (12, 14, 2), (15, 17, 2)]
