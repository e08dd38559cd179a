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
    if not is_stream_key(entry.object_key):
        buf = bytearray(blob)
        patch_batch(buf, 0, entry.base_offset, -1)
        yield entry.base_offset, entry.last_offset, entry.max_timestamp, bytes(buf)
        return
    view = memoryview(blob)
    for pos, h in iter_batches(view):
        last = h.base_offset + h.last_offset_delta
        yield h.base_offset, last, h.max_timestamp, bytes(view[pos : pos + h.size])


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
    out = bytearray()
    chunks: list[_Chunk] = []
    for entry, blob in parts:
        append_ms = entry.window_ms
        window = append_ms // step
        for base, last, max_ts, batch in batches_of(entry, blob):
            c = chunks[-1] if chunks else None
            if c is None or c.window != window or c.length + len(batch) > chunk_bytes:
                c = _Chunk(base, last, len(out), 0, max_ts, append_ms, window)
                chunks.append(c)
            c.last_offset = last
            c.length += len(batch)
            c.max_timestamp = max(c.max_timestamp, max_ts)
            out += batch
    first, final = parts[0][0].base_offset, parts[-1][0].last_offset
    key = stream_object_key(stream_id, first, final, leader_epoch)
    entries = tuple(
        IndexEntry(
            c.base_offset, c.last_offset, key, c.position, c.length, c.max_timestamp, c.append_ms
        )
        for c in chunks
    )
    return StreamObject(key, bytes(out), entries)
