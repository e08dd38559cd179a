"""Decodes the records of one batch: the slow path (ListOffsets by timestamp, tests).

Produce and fetch never come here; they move batches as bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from zonegate.records.batch import HEADER_SIZE, BatchHeader, CorruptBatch, validate_batches
from zonegate.records.codecs import decompress


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise CorruptBatch("varint runs past the records")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(data, pos)
    if n < 0:
        return None, pos
    if pos + n > len(data):
        raise CorruptBatch("record field runs past the records")
    return data[pos : pos + n], pos + n


def decode_records(batch: bytes) -> list[Record]:
    """The records of a single batch (validated first), with absolute offsets and timestamps."""
    (h,) = validate_batches(batch)
    return _decode(h, batch)


def _decode(h: BatchHeader, batch: bytes) -> list[Record]:
    try:
        body = decompress(h.compression, bytes(batch[HEADER_SIZE : h.size]))
    except Exception as exc:
        raise CorruptBatch(f"cannot decompress batch: {exc}") from exc
    out = []
    pos = 0
    for _ in range(h.record_count):
        length, pos = _varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = _varint(body, pos)
        off_delta, pos = _varint(body, pos)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        n_headers, pos = _varint(body, pos)
        headers = []
        for _ in range(n_headers):
            hk, pos = _bytes(body, pos)
            hv, pos = _bytes(body, pos)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        if pos != end:
            raise CorruptBatch("record length does not match its fields")
        ts = h.max_timestamp if h.timestamp_type == 1 else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, tuple(headers)))
    return out
