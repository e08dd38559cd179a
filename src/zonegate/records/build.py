"""Builds valid v2 record batches: for tests and tools, never on the broker's data path
(its varint writer also serves records/retain.py)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from zonegate.records.codecs import compress

# (key, value, headers, timestamp in ms)
RecordSpec = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]

_AFTER_CRC = struct.Struct(">hiqqqhii")
_BEFORE_CRC = struct.Struct(">qiibI")


def zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)  # zig-zag, as Kafka's varlong
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(b: bytes | None) -> bytes:
    return zigzag_varint(-1) if b is None else zigzag_varint(len(b)) + b


def build_batch(
    records: Sequence[RecordSpec],
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    is_transactional: bool = False,
    timestamp_type: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One batch holding `records`, (key, value, headers, timestamp ms) each.

    The first record's timestamp is the base, as Java and librdkafka do; a later
    record may be older (deltas are signed). Snappy is written raw (see codecs).
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    base_ts = records[0][3]
    body = bytearray()
    for i, (key, value, headers, ts) in enumerate(records):
        rec = bytearray(b"\x00")
        rec += zigzag_varint(ts - base_ts) + zigzag_varint(i) + _field(key) + _field(value)
        rec += zigzag_varint(len(headers))
        for hk, hv in headers:
            rec += _field(hk.encode()) + _field(hv)
        body += zigzag_varint(len(rec)) + rec
    attributes = compression | (timestamp_type << 3) | (0x10 if is_transactional else 0)
    after_crc = _AFTER_CRC.pack(
        attributes,
        len(records) - 1,
        base_ts,
        max(r[3] for r in records),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + compress(compression, bytes(body))
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    head = _BEFORE_CRC.pack(base_offset, batch_length, partition_leader_epoch, 2, crc32c(after_crc))
    return head + after_crc
