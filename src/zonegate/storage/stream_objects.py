"""Stream objects: one partition's batches in offset order, offsets final, indexed by chunks.

The partition's leader writes them when it compacts the ranges of WAL objects
its partition lies in (docs/storage.md, "Part 2"). An object is the batches
of offsets base..last exactly as stored, each batch's base offset patched to
its final offset (the CRC does not cover it). It is indexed by *chunks*: runs
of consecutive batches of at most `CHUNK_BYTES` (a larger batch is a chunk
alone), cut also where a batch's append time enters another `segment.ms`
window so that segments stay exact. An index entry of a chunk has the first
batch's base offset, the last batch's last offset, the run's position and
length, the largest max timestamp, and the first batch's append time.

A reader tells a chunk from a WAL batch by its key (`is_stream_key`): a chunk
holds whole batches whose base offsets are already final.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from zonegate.records.batch import iter_batches, patch_batch
from zonegate.storage.index import IndexEntry

STREAMS_PREFIX = "streams/"
CHUNK_BYTES = 1 << 20
# A batch's bytes up to the end of its partition leader epoch: what patch_batch rewrites.
_PATCHED = 16


def stream_object_key(stream_id: int, base_offset: int, last_offset: int, epoch: int) -> str:
    """A new key for a stream object: the random tail makes each upload its own key, so a
    compaction retried, or redone by the next leader, never overwrites one in use."""
    return (
        f"{STREAMS_PREFIX}{stream_id}/{base_offset:020d}-{last_offset:020d}-{epoch}-"
        f"{secrets.token_hex(4)}"
    )


def is_stream_key(key: str) -> bool:
    return key.startswith(STREAMS_PREFIX)


def stream_object_offsets(key: str) -> tuple[int, int] | None:
    """(first, last offset) a stream object's key says it holds; None for another key."""
    if not is_stream_key(key):
        return None
    first, last = key.split("/", 2)[2].split("-", 2)[:2]
    return int(first), int(last)


@dataclass(frozen=True, slots=True)
class StreamObject:
    key: str
    data: bytes
    entries: tuple[IndexEntry, ...]  # its chunks, in offset order


@dataclass(slots=True)
class _Chunk:
    base_offset: int
    last_offset: int
    position: int
    length: int
    max_timestamp: int
    append_ms: int
    window: int


def batches_of(entry: IndexEntry, blob: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """(base offset, last offset, max timestamp, bytes) of each batch of an entry's blob,
    base offsets final: a WAL entry is one batch patched to the entry's base offset; a
    chunk's batches are final already."""
    for base, last, max_ts, pos, size in _batch_spans(entry, blob):
        batch = bytearray(blob[pos : pos + size])
        if not is_stream_key(entry.object_key):
            patch_batch(batch, 0, base, -1)
        yield base, last, max_ts, bytes(batch)


def _batch_spans(entry: IndexEntry, blob: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """As `batches_of`, with each batch's position and size in the blob instead of its
    bytes, and a WAL batch's base offset not yet patched."""
    if not is_stream_key(entry.object_key):
        yield entry.base_offset, entry.last_offset, entry.max_timestamp, 0, len(blob)
        return
    for pos, h in iter_batches(blob):
        yield h.base_offset, h.base_offset + h.last_offset_delta, h.max_timestamp, pos, h.size


def build_stream_object(
    stream_id: int,
    leader_epoch: int,
    parts: Sequence[tuple[IndexEntry, bytes]],
    *,
    segment_ms: int,
    chunk_bytes: int = CHUNK_BYTES,
) -> StreamObject:
    """The stream object holding `parts` (index entries in offset order, and their bytes),
    with the entries of its chunks."""
    if not parts:
        raise ValueError("a stream object needs at least one batch")
    step = max(segment_ms, 1)
    # The object's pieces, joined once at the end: each batch is copied once, straight
    # into the object (a copy per batch on the way, and the bytearray grown then copied
    # out, cost more than the rest: each fresh buffer of this size is an mmap and its
    # page faults). A WAL batch's first 16 bytes are replaced by a patched copy.
    pieces: list[bytes | bytearray | memoryview] = []
    size_so_far = 0
    chunks: list[_Chunk] = []
    for entry, blob in parts:
        append_ms = entry.window_ms
        window = append_ms // step
        wal = not is_stream_key(entry.object_key)
        view = memoryview(blob)
        for base, last, max_ts, pos, size in _batch_spans(entry, blob):
            c = chunks[-1] if chunks else None
            if c is None or c.window != window or c.length + size > chunk_bytes:
                c = _Chunk(base, last, size_so_far, 0, max_ts, append_ms, window)
                chunks.append(c)
            c.last_offset = last
            c.length += size
            c.max_timestamp = max(c.max_timestamp, max_ts)
            if wal:
                head = bytearray(view[pos : pos + _PATCHED])
                patch_batch(head, 0, base, -1)
                pieces.append(head)
                pieces.append(view[pos + _PATCHED : pos + size])
            else:
                pieces.append(view[pos : pos + size])
            size_so_far += size
    first, final = parts[0][0].base_offset, parts[-1][0].last_offset
    key = stream_object_key(stream_id, first, final, leader_epoch)
    entries = tuple(
        IndexEntry(
            c.base_offset, c.last_offset, key, c.position, c.length, c.max_timestamp, c.append_ms
        )
        for c in chunks
    )
    return StreamObject(key, b"".join(pieces), entries)
