"""decode_records: every codec round-trips through build_batch; damage inside bodies is named."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable

import cramjam
import pytest
from crc32c import crc32c

from zonegate.records.batch import CRC_START, HEADER_SIZE, CorruptBatch, validate_batches
from zonegate.records.build import build_batch
from zonegate.records.codecs import XERIAL_MAGIC, xerial_compress
from zonegate.records.decode import EXPANSION_LIMIT, Record, body_limit, decode_records

pytestmark = pytest.mark.unit

RECS = [
    (b"key-0", b"value-0", (("trace", b"abc"), ("empty", b""), ("none", None)), 1_700_000_000_000),
    (None, b"no key", (), 1_700_000_000_050),
    (b"no value", None, (("ключ", b"\x00\xff"),), 1_699_999_999_990),  # older than base
    (b"", b"", (), 1_700_000_000_001),
    (b"big", bytes(range(256)) * 300, (), 1_700_000_000_002),  # 3-byte length varint
]


def _expected(base_offset: int) -> list[Record]:
    return [Record(base_offset + i, ts, k, v, tuple(h)) for i, (k, v, h, ts) in enumerate(RECS)]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip_every_codec(codec: int) -> None:
    batch = build_batch(RECS, base_offset=1000, compression=codec)
    (h,) = validate_batches(batch)
    assert h.compression == codec
    if codec:
        assert len(batch) < 0.5 * len(build_batch(RECS))  # the body really is compressed
    assert decode_records(batch) == _expected(1000)


def test_several_batches_decode_in_order() -> None:
    blob = build_batch(RECS[:2], base_offset=0, compression=1) + build_batch(
        RECS[2:], base_offset=2, compression=4
    )
    assert decode_records(blob) == _expected(0)


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    batch = build_batch(RECS, timestamp_type=1, compression=3)
    assert {r.timestamp for r in decode_records(batch)} == {1_700_000_000_050}
    create_time = decode_records(build_batch(RECS, compression=3))
    assert [r.timestamp for r in create_time] == [ts for *_, ts in RECS]


def _rewrap(batch: bytes, codec: int, compress: Callable[[bytes], bytes]) -> bytes:
    """`batch` (uncompressed) with its records compressed by `compress` under `codec`."""
    head = bytearray(batch[:HEADER_SIZE])
    body = compress(batch[HEADER_SIZE:])
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(body))
    (attributes,) = struct.unpack_from(">h", head, CRC_START)
    struct.pack_into(">h", head, CRC_START, (attributes & ~7) | codec)
    out = bytearray(head + body)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[CRC_START:])))
    return bytes(out)


def test_xerial_framed_snappy_with_several_blocks() -> None:
    plain = build_batch(RECS)
    batch = _rewrap(plain, 2, lambda b: xerial_compress(b, block_size=4096))
    assert batch[HEADER_SIZE:].startswith(XERIAL_MAGIC)
    assert len(plain) - HEADER_SIZE > 4 * 4096  # several blocks, not one
    assert decode_records(batch) == _expected(0)


def _raw_body_batch(body: bytes, codec: int, count: int) -> bytes:
    """A batch whose compressed body is exactly `body` (CRC valid) and holds `count` records."""
    batch = bytearray(_rewrap(build_batch(RECS[:1]), codec, lambda _: body))
    struct.pack_into(">i", batch, 57, count)
    struct.pack_into(">i", batch, 23, count - 1)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


def _records_body(n: int) -> bytes:
    return build_batch(RECS[:n])[HEADER_SIZE:]


@pytest.mark.parametrize(
    "body,codec,count,message",
    [
        (b"\x1f\x8b not gzip at all", 1, 1, r"gzip body does not decompress"),
        (b"\xff\xff\xff\xff\x0f garbage", 2, 1, r"snappy body does not decompress"),
        (b"\x04\x22\x4d\x18 truncated frame", 3, 1, r"lz4 body does not decompress"),
        (b"\x28\xb5\x2f\xfd junk", 4, 1, r"zstd body does not decompress"),
        (
            XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xf0",
            2,
            1,
            r"bad length -16",
        ),
        (XERIAL_MAGIC + b"\x00\x00\x00\x01", 2, 1, r"xerial snappy header is truncated"),
        (bytes(cramjam.zstd.compress(_records_body(2))), 4, 3, r"record 2 .*past the end"),
        (bytes(cramjam.gzip.compress(_records_body(2))), 1, 1, r"bytes after its 1 records"),
    ],
)
def test_damage_inside_compressed_bodies(body: bytes, codec: int, count: int, message: str) -> None:
    batch = _raw_body_batch(body, codec, count)
    validate_batches(batch)  # the bytes pass produce validation: the body is never opened there
    with pytest.raises(CorruptBatch, match=message):
        decode_records(batch)


def test_null_header_key_is_named() -> None:
    batch = bytearray(build_batch([(b"k", b"v", (("h", b"x"),), 1)]))
    key_len_at = batch.index(b"\x02h") if b"\x02h" in batch else -1
    assert key_len_at > HEADER_SIZE
    batch[key_len_at : key_len_at + 2] = b"\x01\x00"  # null key; pad keeps the length
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[CRC_START:])))
    with pytest.raises(
        CorruptBatch, match=r"record 0 of batch at offset 0: a header has a null key"
    ):
        decode_records(bytes(batch))


_BOMB = bytes(64 * 1024 * 1024)  # 64 MiB of zeros: each codec makes it small


@pytest.mark.parametrize(
    ("codec", "compress"),
    [
        (1, lambda d: bytes(cramjam.gzip.compress(d))),
        (2, lambda d: bytes(cramjam.snappy.compress_raw(d))),
        (2, lambda d: xerial_compress(d, block_size=1024 * 1024)),
        (3, lambda d: bytes(cramjam.lz4.compress(d))),
        (4, lambda d: bytes(cramjam.zstd.compress(d))),
    ],
    ids=["gzip", "snappy", "xerial", "lz4", "zstd"],
)
def test_decompression_bomb_is_refused_within_bounded_memory(
    codec: int, compress: Callable[[bytes], bytes]
) -> None:
    """A body of a few KiB claiming 64 MiB is refused, and the decoder allocates no more
    than the limit: the larger of max.message.bytes and 16 times the body (issue 12)."""
    body = compress(_BOMB)
    assert len(body) * EXPANSION_LIMIT < len(_BOMB)
    batch = _raw_body_batch(body, codec, 1)
    limit = body_limit(len(body))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptBatch, match=f"within the limit of {limit} bytes"):
            decode_records(batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * limit + len(batch) + 1024 * 1024


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_highly_compressible_batch_within_max_message_bytes_decodes(codec: int) -> None:
    """A legitimate batch compressing far beyond 16x still decodes when its records fit in
    max.message.bytes, as a producer's batch.size keeps them."""
    recs = [(b"k%d" % i, b"\x00" * 1000, (), 1_700_000_000_000) for i in range(900)]
    batch = build_batch(recs, compression=codec)
    assert len(batch) * EXPANSION_LIMIT < 900 * 1000
    assert len(decode_records(batch)) == 900
    with pytest.raises(CorruptBatch, match="within the limit"):
        decode_records(batch, max_message_bytes=64 * 1024)
