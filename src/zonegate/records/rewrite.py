"""What the produce path may change in a batch, as Kafka's broker does: its timestamps and
its codec.

- `record_times`: every record's timestamp, read from the records (a compressed
  body is decompressed within the limits of records/decode.py); `keyless_records`:
  the records without a key (compacted topics refuse them).
- `stamp`: sets a batch's timestamp type and max timestamp and recomputes its
  CRC (LogAppendTime, or a CreateTime header that disagrees with its records).
- `recompress`: the same batch with its records compressed with another codec
  (a topic's `compression.type`).

Base offset and partition leader epoch, which the CRC does not cover, are
left as they are. docs/storage.md, "Timestamps".
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from zonegate.records.batch import (
    CRC_OFFSET,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptBatch,
    varint_at,
    varlong_at,
)
from zonegate.records.codecs import (
    KAFKA_LEVELS,
    CodecError,
    CompressionLevels,
    compress,
    decompress,
)
from zonegate.records.decode import body_limit

CREATE_TIME, LOG_APPEND_TIME = 0, 1
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_OFFSET = 35
_LENGTH = struct.Struct(">i")
_LENGTH_OFFSET = 8
CODEC_IDS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def batch_body(h: BatchHeader, batch: bytes, max_message_bytes: int) -> bytes:
    """The records of `batch` as bytes, decompressed within the limits of decode.py."""
    payload = batch[HEADER_SIZE : h.size]
    try:
        return decompress(h.compression, payload, body_limit(len(payload), max_message_bytes))
    except CodecError as exc:
        raise CorruptBatch(str(exc)) from exc


def record_times(h: BatchHeader, batch: bytes, max_message_bytes: int) -> list[int]:
    """The timestamp of each record of `batch` (whose header is `h`), in order."""
    return [ts for ts, _ in record_summaries(h, batch, max_message_bytes)]


def keyless_records(h: BatchHeader, batch: bytes, max_message_bytes: int) -> list[int]:
    """The index in the batch of each record that has no key (a compacted topic refuses
    them, as Kafka's LogValidator.validateKey does)."""
    summaries = record_summaries(h, batch, max_message_bytes)
    return [i for i, (_, has_key) in enumerate(summaries) if not has_key]


def record_summaries(
    h: BatchHeader, batch: bytes, max_message_bytes: int
) -> list[tuple[int, bool]]:
    """(timestamp, whether it has a key) of each record of `batch`, in order."""
    body = batch_body(h, batch, max_message_bytes)
    out: list[tuple[int, bool]] = []
    pos = 0
    for i in range(h.record_count):
        length, pos = varint_at(body, pos, len(body))
        end = pos + length
        if length < 6 or end > len(body):
            raise CorruptBatch(f"record {i} has length {length} in a body of {len(body)} bytes")
        delta = varlong_at(body, pos + 1, end, i)  # after the attributes byte
        at = pos + 1  # skip the timestamp and offset deltas to the key's length
        for _ in range(2):
            while at < end and body[at] & 0x80:
                at += 1
            at += 1
        key_length, _ = varint_at(body, at, end)
        out.append((h.base_timestamp + delta, key_length >= 0))
        pos = end
    if pos != len(body):
        raise CorruptBatch(f"{len(body) - pos} bytes follow the batch's {h.record_count} records")
    return out


def stamp(batch: bytearray, timestamp_type: int, max_timestamp: int) -> None:
    """Sets the batch's timestamp type and max timestamp in place, and its CRC."""
    (attributes,) = _ATTRIBUTES.unpack_from(batch, _ATTRIBUTES_OFFSET)
    attributes = (attributes & ~0x08) | (0x08 if timestamp_type == LOG_APPEND_TIME else 0)
    _ATTRIBUTES.pack_into(batch, _ATTRIBUTES_OFFSET, attributes)
    _MAX_TIMESTAMP.pack_into(batch, _MAX_TIMESTAMP_OFFSET, max_timestamp)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[CRC_START:]))


def recompress(
    h: BatchHeader,
    batch: bytes,
    codec: int,
    max_message_bytes: int,
    levels: CompressionLevels = KAFKA_LEVELS,
) -> bytes:
    """`batch` with its records compressed with `codec` (0 none) instead of its own, at
    the topic's level for that codec."""
    body = batch_body(h, batch, max_message_bytes)
    payload = compress(codec, body, levels)
    out = bytearray(batch[:HEADER_SIZE])
    out += payload
    _LENGTH.pack_into(out, _LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    (attributes,) = _ATTRIBUTES.unpack_from(out, _ATTRIBUTES_OFFSET)
    _ATTRIBUTES.pack_into(out, _ATTRIBUTES_OFFSET, (attributes & ~0x07) | codec)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
