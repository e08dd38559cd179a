"""Commit and abort markers as bytes: Kafka's control batch holding one EndTransactionMarker.

A marker is a v2 record batch whose attributes say transactional and control, with
base sequence -1 and one record: key (version 0, type ABORT=0 or COMMIT=1) and
value (version 0, coordinator epoch), both big-endian, no headers. Kafka writes it
with `MemoryRecords.withEndTransactionMarker`; clients skip it on read and use its
offset only to step past it. `encode_marker` makes the bytes the coordinator node
stages in its WAL (offsets are the leader's, patched on read like any batch);
`decode_marker` reads one back (the leader's check, the cleaner, DescribeProducers).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from zonegate.records.batch import HEADER_SIZE, CorruptBatch, parse_header, validate_batches

ABORT = 0
COMMIT = 1
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_AFTER_CRC = struct.Struct(">hiqqqhii")
_BEFORE_CRC = struct.Struct(">qiibI")
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
# The one record, every varint a single byte: length 16, attributes 0, timestamp delta
# 0, offset delta 0, key length 4, the key, value length 6, the value, no headers.
_RECORD_HEAD = bytes([32, 0, 0, 0, 8])
_VALUE_LEN = bytes([12])
_NO_HEADERS = bytes([0])


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    timestamp_ms: int


def encode_marker(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    timestamp_ms: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    record = (
        _RECORD_HEAD
        + _KEY.pack(0, COMMIT if commit else ABORT)
        + _VALUE_LEN
        + _VALUE.pack(0, coordinator_epoch)
        + _NO_HEADERS
    )
    after_crc = (
        _AFTER_CRC.pack(
            _TRANSACTIONAL | _CONTROL,  # CreateTime, uncompressed
            0,  # last offset delta: one record
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            -1,  # control batches carry no sequence
            1,
        )
        + record
    )
    length = 4 + 1 + 4 + len(after_crc)
    return _BEFORE_CRC.pack(base_offset, length, partition_leader_epoch, 2, crc32c(after_crc)) + (
        after_crc
    )


def decode_marker(batch: bytes | memoryview) -> EndTxnMarker:
    """The marker in one control batch; CorruptBatch for anything else (a data batch, a
    control batch of another kind, a bad CRC, a key or value too short). A value of a
    newer version is read as version 0, as Kafka reads it."""
    (h,) = validate_batches(bytes(batch), [])
    if not h.is_control:
        raise CorruptBatch("not a control batch")
    if h.record_count != 1 or h.compression:
        raise CorruptBatch("a transaction marker batch holds one uncompressed record")
    data = bytes(batch)
    pos = HEADER_SIZE
    _, pos = _varint(data, pos)  # record length
    pos += 1  # attributes
    _, pos = _varint(data, pos)  # timestamp delta
    _, pos = _varint(data, pos)  # offset delta
    key_len, pos = _varint(data, pos)
    if key_len < _KEY.size:
        raise CorruptBatch(f"control record key of {key_len} bytes")
    version, kind = _KEY.unpack_from(data, pos)
    pos += key_len
    if version < 0 or kind not in (ABORT, COMMIT):
        raise CorruptBatch(f"control record of type {kind} is not a transaction marker")
    value_len, pos = _varint(data, pos)
    if value_len < _VALUE.size:
        raise CorruptBatch(
            f"end transaction marker value of {value_len} bytes, at least 6 expected"
        )
    value_version, coordinator_epoch = _VALUE.unpack_from(data, pos)
    if value_version < 0:
        raise CorruptBatch(f"end transaction marker of version {value_version}")
    return EndTxnMarker(
        kind == COMMIT, coordinator_epoch, h.producer_id, h.producer_epoch, h.base_timestamp
    )


def is_marker(batch: bytes | memoryview) -> bool:
    """Whether the batch at the start of `batch` is a control batch (its header only)."""
    return len(batch) >= HEADER_SIZE and parse_header(batch).is_control


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        if pos >= len(data):
            raise CorruptBatch("control record runs past the end of its batch")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptBatch("control record varint longer than 10 bytes")
