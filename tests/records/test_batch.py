"""validate_batches, iter_batches and patch_batch on batches built here.

Each kind of damage a producer (or a bug) can do is named in the error.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from zonegate.records.batch import (
    CRC_OFFSET,
    CRC_START,
    HEADER_SIZE,
    CorruptBatch,
    UnsupportedMagic,
    iter_batches,
    patch_batch,
    validate_batches,
)
from zonegate.records.build import build_batch

pytestmark = pytest.mark.unit

RECS = [(b"k%d" % i, b"v" * i, (("h", b"x"),), 1000 + i) for i in range(1, 40)]


def _fix_crc(batch: bytearray, pos: int = 0) -> None:
    """Recomputes the CRC so a test reaches the check behind it."""
    (length,) = struct.unpack_from(">i", batch, pos + 8)
    end = pos + 12 + length
    struct.pack_into(">I", batch, pos + CRC_OFFSET, crc32c(bytes(batch[pos + CRC_START : end])))


def test_header_fields_are_read() -> None:
    batch = build_batch(
        RECS,
        base_offset=77,
        producer_id=5,
        producer_epoch=1,
        base_sequence=9,
        compression=3,
        is_transactional=True,
        timestamp_type=1,
        partition_leader_epoch=4,
    )
    (h,) = validate_batches(batch)
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (77, 4, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 1, 9)
    assert (h.record_count, h.last_offset_delta) == (39, 38)
    assert (h.base_timestamp, h.max_timestamp) == (1001, 1039)
    assert (h.compression, h.timestamp_type, h.is_transactional, h.is_control) == (
        3,
        1,
        True,
        False,
    )
    assert h.size == len(batch)


def test_control_bit() -> None:
    batch = bytearray(build_batch(RECS))
    struct.pack_into(">h", batch, CRC_START, 0x20)
    _fix_crc(batch)
    (h,) = validate_batches(bytes(batch))
    assert h.is_control and not h.is_transactional and h.compression == 0


def test_several_batches_and_memoryview() -> None:
    a = build_batch(RECS[:3])
    b = build_batch(RECS[3:], compression=4)
    c = build_batch([(None, None, (), 5)])
    blob = a + b + c
    for form in (blob, memoryview(blob), memoryview(bytearray(blob))):
        headers = validate_batches(form)
        assert [h.record_count for h in headers] == [3, 36, 1]
    assert [(pos, h.record_count) for pos, h in iter_batches(blob)] == [
        (0, 3),
        (len(a), 36),
        (len(a) + len(b), 1),
    ]


def test_long_records_take_the_general_varint_path() -> None:
    # 3-byte length varints (records of 8 KiB and more) and 1-byte ones mixed.
    recs = [(b"k", b"x" * n, (), 1) for n in (10, 9000, 20, 70000, 3)]
    (h,) = validate_batches(build_batch(recs))
    assert h.record_count == 5


def test_iter_batches_stops_at_partial_or_damaged_batch() -> None:
    a = build_batch(RECS[:3])
    b = build_batch(RECS[3:6])
    assert [p for p, _ in iter_batches(a + b[:-1])] == [0]
    assert [p for p, _ in iter_batches(a + b[: HEADER_SIZE - 1])] == [0]
    damaged = bytearray(a + b)
    struct.pack_into(">i", damaged, len(a) + 8, -12)  # would step backwards forever
    assert [p for p, _ in iter_batches(damaged)] == [0]


def test_patch_batch_keeps_the_crc_valid() -> None:
    a = build_batch(RECS[:3])
    b = build_batch(RECS[3:], compression=1)
    buf = bytearray(a + b)
    patch_batch(buf, len(a), 1 << 40, 17)
    headers = validate_batches(bytes(buf))  # would raise if the CRC covered the patch
    assert (headers[1].base_offset, headers[1].partition_leader_epoch) == (1 << 40, 17)
    assert (headers[0].base_offset, headers[0].partition_leader_epoch) == (0, -1)
    assert buf[len(a) + 16 :] == b[16:]  # nothing else moved


def _damage(what: str) -> bytes:
    batch = bytearray(build_batch(RECS))
    good = build_batch(RECS[:2])
    if what == "crc":
        batch[-1] ^= 1
    elif what == "crc-attributes":
        batch[CRC_START + 1] ^= 4  # the codec bits are covered by the CRC too
    elif what == "magic1":
        batch[16] = 1
    elif what == "magic1-short":  # a v1 message set shorter than a v2 header
        batch[16] = 1
        return bytes(batch[:34])
    elif what == "truncated":
        return bytes(batch[:-5])
    elif what == "short-header":
        return bytes(batch[:40])
    elif what == "length-too-large":
        struct.pack_into(">i", batch, 8, len(batch))
    elif what == "length-too-small":
        struct.pack_into(">i", batch, 8, 48)
    elif what == "count-fewer":
        struct.pack_into(">i", batch, 57, 38)
        struct.pack_into(">i", batch, 23, 37)
        _fix_crc(batch)
    elif what == "count-zero":
        struct.pack_into(">i", batch, 57, 0)
        struct.pack_into(">i", batch, 23, -1)
        _fix_crc(batch)
    elif what == "offset-delta":
        struct.pack_into(">i", batch, 23, 12)
        _fix_crc(batch)
    elif what == "codec":
        struct.pack_into(">h", batch, CRC_START, 5)
        _fix_crc(batch)
    elif what == "record-overrun":
        batch = bytearray(build_batch([(b"k", b"v", (), 1)]))
        batch[HEADER_SIZE] += 4  # the only record's length varint: 2 bytes more than it has
        _fix_crc(batch)
    elif what == "record-length-zero":
        batch[HEADER_SIZE] = 0
        _fix_crc(batch)
    elif what == "trailing-short":
        return good + bytes(batch) + b"\x00" * 10
    elif what == "trailing-zeros":
        return good + bytes(batch) + b"\x00" * 20
    elif what == "second-bad":
        bad = bytearray(good)
        bad[-1] ^= 0x40
        return good + bytes(bad)
    elif what == "empty":
        return b""
    else:
        raise AssertionError(what)
    return bytes(batch)


@pytest.mark.parametrize(
    "what,message",
    [
        ("crc", r"batch 0 fails its CRC32C check"),
        ("crc-attributes", r"CRC32C"),
        ("magic1", r"batch 0 at byte 0 has magic 1; only magic 2"),
        ("magic1-short", r"has magic 1"),
        ("truncated", r"runs 5 bytes past the end of the records"),
        ("short-header", r"40 trailing bytes after batch 0 are too few for a batch header"),
        ("length-too-large", r"runs 12 bytes past the end"),
        ("length-too-small", r"length 48, below the minimum of 49"),
        ("count-fewer", r"declares 38 records but holds 39"),
        ("count-zero", r"record count 0"),
        ("offset-delta", r"last offset delta 12 but 39 records"),
        ("codec", r"unknown compression codec 5"),
        ("record-overrun", r"runs 2 bytes past the end of the batch"),
        ("record-length-zero", r"record 0 has length 0"),
        ("trailing-short", r"10 trailing bytes after batch 2"),
        ("trailing-zeros", r"batch 2 at byte \d+ has magic 0"),
        ("second-bad", r"batch 1 fails its CRC32C"),
        ("empty", r"no record batches"),
    ],
)
def test_damage_is_named(what: str, message: str) -> None:
    with pytest.raises(CorruptBatch, match=message) as info:
        validate_batches(_damage(what))
    assert info.value.reason == str(info.value)


def test_old_magic_is_its_own_kind() -> None:
    with pytest.raises(UnsupportedMagic) as info:
        validate_batches(_damage("magic1"))
    assert info.value.magic == 1
    with pytest.raises(CorruptBatch) as other:
        validate_batches(_damage("crc"))
    assert not isinstance(other.value, UnsupportedMagic)
