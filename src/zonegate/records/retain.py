"""A stored batch with only some of its records: what key-based cleaning writes back.

Follows Kafka's `MemoryRecords.filterTo` and `MemoryRecordsBuilder`: the batch
keeps its base offset and its last offset delta (so its producer's last
sequence survives), its producer id, epoch and base sequence, its partition
leader epoch and timestamp type; only the record count, the body and the max
timestamp (CreateTime) follow the records kept. Records keep their offset
deltas and timestamps. A batch holding a tombstone gets a *delete horizon*
(KIP-534): attribute bit 6 set and the base timestamp set to the horizon, the
records' timestamp deltas rewritten against it, so the batch itself says when
its tombstones may go and no other state is needed. A batch that must stay
although all its records went is written as Kafka's empty batch: a header,
no records, uncompressed.

Records are copied as they are stored (attributes, value, headers), only
their timestamp delta rewritten when the base timestamp moves.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from crc32c import crc32c

from zonegate.records.batch import BatchHeader, CorruptBatch
from zonegate.records.build import zigzag_varint
from zonegate.records.codecs import KAFKA_LEVELS, CompressionLevels, compress
from zonegate.records.decode import BodyReader
from zonegate.records.rewrite import batch_body

DELETE_HORIZON_FLAG = 0x40
# Timestamp type, transactional and control bits: kept from the original batch.
_KEPT_ATTRIBUTES = 0x08 | 0x10 | 0x20
_HEAD = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, crc
_REST = struct.Struct(">hiqqqhii")  # attributes .. record count


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record of a stored batch, as the cleaner needs it."""

    offset: int
    timestamp: int  # base timestamp + delta, as stored
    key: bytes | None
    is_tombstone: bool  # a null value
    raw_head: bytes  # the attributes byte
    offset_delta: int
    raw_tail: bytes  # value length, value and headers, copied as they are


def delete_horizon(h: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534), when it has one."""
    return h.base_timestamp if h.attributes & DELETE_HORIZON_FLAG else None


def stored_records(h: BatchHeader, batch: bytes, max_message_bytes: int) -> list[StoredRecord]:
    """The records of `batch` (whose header is `h`), decompressed within the limits of
    records/decode.py. Raises CorruptBatch."""
    body = batch_body(h, batch, max_message_bytes)
    reader = BodyReader(body)
    out: list[StoredRecord] = []
    for i in range(h.record_count):
        try:
            length = reader.varint()
            end = reader.pos + length
            start = reader.pos
            reader.skip(1)
            ts_delta = reader.varint()
            offset_delta = reader.varint()
            key = reader.bytes()
            tail_start = reader.pos
            value_length = reader.varint()
            if end > len(body) or end < reader.pos:
                raise CorruptBatch(f"length {length} does not hold its fields")
        except CorruptBatch as exc:
            raise CorruptBatch(f"record {i} of batch at offset {h.base_offset}: {exc}") from None
        out.append(
            StoredRecord(
                h.base_offset + offset_delta,
                h.base_timestamp + ts_delta,
                key,
                value_length < 0,
                body[start : start + 1],
                offset_delta,
                body[tail_start:end],
            )
        )
        reader.pos = end
    if reader.pos != len(body):
        raise CorruptBatch(
            f"batch at offset {h.base_offset} has {len(body) - reader.pos} bytes "
            f"after its {h.record_count} records"
        )
    return out


def _batch(h: BatchHeader, attributes: int, rest: tuple[int, ...], payload: bytes) -> bytes:
    after_crc = _REST.pack(attributes, *rest) + payload
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    head = _HEAD.pack(h.base_offset, batch_length, h.partition_leader_epoch, 2, crc32c(after_crc))
    return head + after_crc


def rebuild_batch(
    h: BatchHeader,
    records: Sequence[StoredRecord],
    codec: int,
    horizon: int | None,
    levels: CompressionLevels = KAFKA_LEVELS,
) -> bytes:
    """`h`'s batch holding only `records` (some of its own, in order), compressed with
    `codec` at the topic's level for it, with delete horizon `horizon` (None: none)."""
    if not records:
        raise ValueError("a rebuilt batch keeps at least one record; else empty_batch")
    base_ts = horizon if horizon is not None else records[0].timestamp
    body = bytearray()
    for r in records:
        rec = r.raw_head + zigzag_varint(r.timestamp - base_ts) + zigzag_varint(r.offset_delta)
        rec += zigzag_varint(-1) if r.key is None else zigzag_varint(len(r.key)) + r.key
        rec += r.raw_tail
        body += zigzag_varint(len(rec)) + rec
    log_append = h.timestamp_type == 1
    max_ts = h.max_timestamp if log_append else max(r.timestamp for r in records)
    attributes = codec | (h.attributes & _KEPT_ATTRIBUTES)
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG
    rest = (
        h.last_offset_delta,
        base_ts,
        max_ts,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        len(records),
    )
    return _batch(h, attributes, rest, compress(codec, bytes(body), levels))


def empty_batch(h: BatchHeader) -> bytes:
    """Kafka's empty batch for `h` (DefaultRecordBatch.writeEmptyHeader): kept when all its
    records went but its producer's last sequence, or its last offset, must stay."""
    rest = (
        h.last_offset_delta,
        -1,  # no base timestamp
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        0,
    )
    return _batch(h, h.attributes & _KEPT_ATTRIBUTES, rest, b"")
