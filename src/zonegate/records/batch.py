"""Kafka record batches (magic v2) as bytes: split, validate, patch; never decompress.

`validate_batches` runs on every produce: one struct unpack per batch header, a
hardware CRC32C over the batch, and for uncompressed batches a walk over the
records' length varints so the declared count is checked against the bytes.
`iter_batches` and `patch_batch` serve the read path, which trusts what produce
validated.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

from crc32c import crc32c

# baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32,
# attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
# producerId i64, producerEpoch i16, baseSequence i32, recordCount i32
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC_OFFSET = 16  # the same place in v0/v1 messages, so any magic can be named
CRC_OFFSET = 17
CRC_START = 21  # the CRC covers attributes .. end of batch
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
# attributes (1) + timestampDelta, offsetDelta, keyLength, valueLength and
# header count (one varint byte each at least)
MIN_RECORD_LENGTH = 6
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


class CorruptBatch(Exception):
    """A batch that cannot be stored or read; `reason` says what is wrong.

    The producer's fault: Kafka answers CORRUPT_MESSAGE.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnsupportedMagic(CorruptBatch):
    """A batch in an older message format (magic 0 or 1); only v2 is stored.

    A subclass so a caller may answer UNSUPPORTED_FOR_MESSAGE_FORMAT instead of
    CORRUPT_MESSAGE without matching on the message text.
    """

    def __init__(self, magic: int, where: str = "record batch") -> None:
        super().__init__(f"{where} has magic {magic}; only magic 2 is supported")
        self.magic = magic


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
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (attribute bits 0-2)."""
        return self.attributes & 0x07

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (attribute bit 3)."""
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return LOG_OVERHEAD + self.batch_length


def _slot_setter(name: str) -> Callable[[BatchHeader, int], None]:
    setter: Callable[[BatchHeader, int], None] = BatchHeader.__dict__[name].__set__
    return setter


# A frozen dataclass's __init__ goes through object.__setattr__ once per field,
# about 2.2 us for these 13: more than the rest of a small batch's checks. The
# slots' own setters do the same work in half the time, on every produce batch.
_new = object.__new__
_S = [_slot_setter(f.name) for f in fields(BatchHeader)]
(
    _s_base_offset,
    _s_batch_length,
    _s_partition_leader_epoch,
    _s_magic,
    _s_crc,
    _s_attributes,
    _s_last_offset_delta,
    _s_base_timestamp,
    _s_max_timestamp,
    _s_producer_id,
    _s_producer_epoch,
    _s_base_sequence,
    _s_record_count,
) = _S


def parse_header(data: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`, unchecked; the caller ensures 61 bytes are there."""
    (a, b, c, d, e, f, g, h_, i, j, k, m, n) = _HEADER.unpack_from(data, pos)
    h: BatchHeader = _new(BatchHeader)
    _s_base_offset(h, a)
    _s_batch_length(h, b)
    _s_partition_leader_epoch(h, c)
    _s_magic(h, d)
    _s_crc(h, e)
    _s_attributes(h, f)
    _s_last_offset_delta(h, g)
    _s_base_timestamp(h, h_)
    _s_max_timestamp(h, i)
    _s_producer_id(h, j)
    _s_producer_epoch(h, k)
    _s_base_sequence(h, m)
    _s_record_count(h, n)
    return h


def varint_at(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """A zig-zag varint (any width) and the position after it."""
    raw = 0
    shift = 0
    while True:
        if pos >= end:
            raise CorruptBatch("record length varint runs past the end of the batch")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 28:  # a record length is an int32: at most 5 varint bytes
            raise CorruptBatch("record length varint is longer than 5 bytes")


def varlong_at(data: bytes | memoryview, pos: int, end: int, index: int) -> int:
    """A record's zig-zag varlong timestamp delta (up to 10 bytes)."""
    raw = 0
    shift = 0
    while True:
        if pos >= end:
            raise CorruptBatch(f"record {index}'s timestamp delta runs past the record")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1)
        shift += 7
        if shift > 63:
            raise CorruptBatch(f"record {index}'s timestamp delta is longer than 10 bytes")


def _too_short(index: int, length: int) -> CorruptBatch:
    return CorruptBatch(
        f"record {index} has length {length}, below the minimum of {MIN_RECORD_LENGTH}"
    )


def _check_record_count(
    data: bytes | memoryview, start: int, end: int, count: int
) -> tuple[int, int]:
    """Checks the records' lengths add up to the batch and their number to `count`;
    returns the smallest and largest timestamp delta among them."""
    # The hot loop of produce validation, about a quarter of a microsecond per
    # record. Records under 8 KiB have a 1- or 2-byte length varint, decoded
    # inline; longer ones take the general reader. The zig-zag sign is the low
    # bit, so an odd raw value is a negative length. The timestamp delta follows
    # the record's attributes byte, usually in one or two bytes as well.
    pos = start
    lo, hi = 2**63, -(2**63)
    for i in range(count):
        if pos >= end:
            if pos > end:
                raise CorruptBatch(
                    f"record {i - 1} runs {pos - end} bytes past the end of the batch"
                )
            raise CorruptBatch(f"batch declares {count} records but holds {i}")
        b = data[pos]
        if b < 0x80:
            raw = b
            pos += 1
        elif pos + 1 < end and (b2 := data[pos + 1]) < 0x80:
            raw = (b & 0x7F) | (b2 << 7)
            pos += 2
        else:
            length, pos = varint_at(data, pos, end)
            if length < MIN_RECORD_LENGTH:
                raise _too_short(i, length)
            raw = length << 1
        if raw & 1 or raw < 2 * MIN_RECORD_LENGTH:
            raise _too_short(i, (raw >> 1) ^ -(raw & 1))
        record_end = pos + (raw >> 1)
        if record_end <= end:
            t = data[pos + 1]
            if t < 0x80:
                delta = (t >> 1) ^ -(t & 1)
            elif (t2 := data[pos + 2]) < 0x80:
                z = (t & 0x7F) | (t2 << 7)
                delta = (z >> 1) ^ -(z & 1)
            else:
                delta = varlong_at(data, pos + 1, record_end, i)
            if delta < lo:
                lo = delta
            if delta > hi:
                hi = delta
        pos = record_end
    if pos > end:
        raise CorruptBatch(f"record {count - 1} runs {pos - end} bytes past the end of the batch")
    if pos < end:
        raise CorruptBatch(_surplus(data, pos, end, count))
    return lo, hi


def _surplus(data: bytes | memoryview, pos: int, end: int, count: int) -> str:
    """Says what follows the declared records; only on the error path."""
    extra = 0
    at = pos
    try:
        while at < end:
            length, at = varint_at(data, at, end)
            if length < MIN_RECORD_LENGTH:
                break
            at += length
            extra += 1
    except CorruptBatch:
        pass
    if at == end:
        return f"batch declares {count} records but holds {count + extra}"
    return f"batch declares {count} records but {end - pos} bytes follow them"


def validate_batches(
    records: bytes | memoryview,
    times: list[tuple[int, int] | None] | None = None,
    *,
    cleaned: bool = False,
) -> list[BatchHeader]:
    """Splits a produce request's records into batches and checks each; raises CorruptBatch.

    Checks, per batch: a whole header, magic 2, a batch length of at least 49
    bytes that stays within `records`, the CRC32C, a record count of at least one
    matching the last offset delta, a known codec, and for uncompressed batches
    that the records' lengths add up to the batch and their number to the count.
    Compressed bodies are not opened: that would cost more than the rest together.
    With `times`, the smallest and largest record timestamp of each uncompressed
    batch is appended to it (None for a compressed one), read in the same walk.
    With `cleaned`, batches as key-based cleaning stores them pass too: fewer
    records than their offsets span, or none (records/retain.py).
    """
    data = records
    view = memoryview(records)  # CRC over slices of this: no copy of the batch
    total = len(data)
    if total == 0:
        raise CorruptBatch("no record batches")
    out: list[BatchHeader] = []
    pos = 0
    while pos < total:
        left = total - pos
        # Name the magic before demanding a v2 header: a v0/v1 message set can be
        # shorter than 61 bytes, and "unsupported magic 1" is the useful answer.
        if left > MAGIC_OFFSET and data[pos + MAGIC_OFFSET] != 2:
            magic = data[pos + MAGIC_OFFSET]
            raise UnsupportedMagic(
                magic - 256 if magic > 127 else magic, f"batch {len(out)} at byte {pos}"
            )
        if left < HEADER_SIZE:
            raise CorruptBatch(
                f"{left} trailing bytes after batch {len(out)} are too few for a batch header"
            )
        h = parse_header(data, pos)
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptBatch(
                f"batch {len(out)} has length {h.batch_length}, "
                f"below the minimum of {MIN_BATCH_LENGTH}"
            )
        end = pos + LOG_OVERHEAD + h.batch_length
        if end > total:
            raise CorruptBatch(
                f"batch {len(out)} has length {h.batch_length} and runs "
                f"{end - total} bytes past the end of the records"
            )
        actual = crc32c(view[pos + CRC_START : end])
        if actual != h.crc:
            raise CorruptBatch(
                f"batch {len(out)} fails its CRC32C check "
                f"(header says {h.crc:#010x}, bytes give {actual:#010x})"
            )
        if h.record_count < (0 if cleaned else 1):
            raise CorruptBatch(f"batch {len(out)} has record count {h.record_count}")
        if h.last_offset_delta != h.record_count - 1 and not (
            cleaned and h.last_offset_delta >= h.record_count - 1
        ):
            raise CorruptBatch(
                f"batch {len(out)} has last offset delta {h.last_offset_delta} "
                f"but {h.record_count} records"
            )
        if h.compression not in CODECS:
            raise CorruptBatch(f"batch {len(out)} has unknown compression codec {h.compression}")
        if h.compression == 0:
            lo, hi = _check_record_count(data, pos + HEADER_SIZE, end, h.record_count)
            if times is not None:
                times.append((h.base_timestamp + lo, h.base_timestamp + hi))
        elif times is not None:
            times.append(None)  # a compressed body is not opened here
        out.append(h)
        pos = end
    return out


def iter_batches(data: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in `data`, without checks, for the read path.

    Stops at a partial batch at the end, and at a batch length too small to
    advance (damage that would otherwise loop forever).
    """
    total = len(data)
    pos = 0
    while total - pos >= HEADER_SIZE:
        h = parse_header(data, pos)
        if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > total:
            return
        yield pos, h
        pos += h.size


_PATCH_OFFSET = struct.Struct(">q")
_PATCH_EPOCH = struct.Struct(">i")


def patch_batch(buf: bytearray, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Rewrites base offset and partition leader epoch of the batch at `pos` in place.

    Neither field is covered by the CRC, so the batch stays valid.
    """
    _PATCH_OFFSET.pack_into(buf, pos, base_offset)
    _PATCH_EPOCH.pack_into(buf, pos + 12, partition_leader_epoch)
