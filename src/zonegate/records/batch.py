"""Kafka record batches (magic v2): bytes in, facts out, never decompressing.

`validate_batches` runs on every produce: one struct unpack per batch header,
a hardware CRC32C over the batch, and for uncompressed batches a walk over the
records' length varints so the declared count is checked against the bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

# baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32,
# attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
# producerId i64, producerEpoch i16, baseSequence i32, recordCount i32
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_CRC_START = 21  # the CRC covers attributes .. end of batch
MIN_BATCH_LENGTH = HEADER_SIZE - 12  # batchLength counts from partitionLeaderEpoch on
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


class CorruptBatch(Exception):
    """A batch that cannot be stored; the reason says what is wrong (CORRUPT_MESSAGE)."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def size(self) -> int:
        return 12 + self.batch_length


def _varint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """A zig-zag varint and the position after it."""
    raw = 0
    shift = 0
    while True:
        if pos >= end:
            raise CorruptBatch("record length varint runs past the batch")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptBatch("record length varint is too long")


def _check_record_count(data: bytes, start: int, end: int, count: int) -> None:
    # The hot loop of produce validation: inline the 1- and 2-byte varints that
    # every record under 8 KiB has, and fall back to the general reader otherwise.
    pos = start
    seen = 0
    while pos < end:
        b = data[pos]
        if b < 0x80:
            raw = b
            pos += 1
        elif pos + 1 < end and data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            length, pos = _varint(data, pos, end)
            raw = -1 if length <= 0 else length << 1
        length = (raw >> 1) ^ -(raw & 1)
        if length <= 0:
            raise CorruptBatch(f"record {seen} has invalid length {length}")
        pos += length
        seen += 1
    if pos > end:
        raise CorruptBatch(f"record {seen - 1} runs past the end of the batch")
    if seen != count:
        raise CorruptBatch(f"batch declares {count} records but holds {seen}")


def validate_batches(records: bytes) -> list[BatchHeader]:
    """Splits a produce request's records into batches, checking each; raises CorruptBatch."""
    data = records
    total = len(data)
    if total == 0:
        raise CorruptBatch("no record batches")
    out: list[BatchHeader] = []
    pos = 0
    while pos < total:
        if total - pos < HEADER_SIZE:
            raise CorruptBatch(f"{total - pos} trailing bytes are too few for a batch header")
        h = BatchHeader(*_HEADER.unpack_from(data, pos))
        if h.magic != 2:
            raise CorruptBatch(f"record batch magic {h.magic} is not supported (only v2)")
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptBatch(f"batch length {h.batch_length} is below the minimum")
        end = pos + 12 + h.batch_length
        if end > total:
            raise CorruptBatch(
                f"batch length {h.batch_length} runs {end - total} bytes past the records"
            )
        if crc32c(memoryview(data)[pos + _CRC_START : end]) != h.crc:
            raise CorruptBatch("CRC32C mismatch")
        if h.record_count < 1:
            raise CorruptBatch(f"batch has record count {h.record_count}")
        if h.last_offset_delta != h.record_count - 1:
            raise CorruptBatch(
                f"last offset delta {h.last_offset_delta} does not match "
                f"record count {h.record_count}"
            )
        if h.compression not in CODECS:
            raise CorruptBatch(f"unknown compression codec {h.compression}")
        if h.compression == 0:
            _check_record_count(data, pos + HEADER_SIZE, end, h.record_count)
        out.append(h)
        pos = end
    return out


def iter_batches(data: bytes | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch, without checks, for the read path."""
    view = memoryview(data)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        h = BatchHeader(*_HEADER.unpack_from(view, pos))
        yield pos, h
        pos += h.size


_PATCH_OFFSET = struct.Struct(">q")
_PATCH_EPOCH = struct.Struct(">i")


def patch_batch(buf: bytearray, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Rewrites base offset and partition leader epoch in place (the CRC covers neither)."""
    _PATCH_OFFSET.pack_into(buf, pos, base_offset)
    _PATCH_EPOCH.pack_into(buf, pos + 12, partition_leader_epoch)
