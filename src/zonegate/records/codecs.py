"""Compression and decompression of batch bodies with cramjam, for every Kafka codec.

Snappy comes in two framings. librdkafka (confluent-kafka) writes raw snappy, one
block. The Java client and kafka-python write the xerial framing of snappy-java:
magic `\\x82SNAPPY\\x00`, two int32 versions, then blocks each prefixed by an
int32 length (kafka-python cuts them at 32 KiB). Both are read. Raw is written:
every client reads it (snappy-java falls back to raw when the magic is absent).
LZ4 is the LZ4 frame format; v2 batches have none of magic 1's header-checksum bug.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import cramjam

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_BLOCK_LENGTH = struct.Struct(">i")


class CodecError(ValueError):
    """The compressed body cannot be decoded, or the codec is unknown."""


def decompress(codec: int, data: bytes, limit: int) -> bytes:
    """The body of a batch compressed with `codec` (attribute bits 0-2), at most `limit`
    bytes: a body that would be larger raises CodecError, and no more than about
    `limit` bytes are ever allocated for it (a few kilobytes of gzip or zstd can
    claim gigabytes)."""
    try:
        if codec == 0:
            return data
        if codec == 2:
            if data.startswith(XERIAL_MAGIC):
                return _xerial_decompress(data, limit)
            # Raw snappy states its length up front: checked before anything is made.
            size = cramjam.snappy.decompress_raw_len(data)
            if size > limit:
                raise CodecError(
                    f"snappy body does not decompress within the limit of {limit} bytes: "
                    f"it claims {size}"
                )
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec in _STREAMED:
            return _bounded(_STREAMED[codec], data, limit)
    except CodecError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, or ValueError
        raise CodecError(f"{codec_name(codec)} body does not decompress: {exc}") from exc
    raise CodecError(f"unknown compression codec {codec}")


# gzip, lz4 (frame) and zstd: decompress_into a buffer of a given size fails, rather
# than grow it, when the body is larger.
_STREAMED = {1: cramjam.gzip, 3: cramjam.lz4, 4: cramjam.zstd}


def _bounded(module: Any, data: bytes, limit: int) -> bytes:
    """Decompresses into a buffer that starts at a few times the input and doubles up to
    `limit`; a body still larger fails. Most bodies fit the first buffer."""
    size = min(limit, max(4 * len(data), 64 * 1024))
    while True:
        out = bytearray(size)
        try:
            n = module.decompress_into(data, out)
        except Exception as exc:
            if size >= limit:
                raise CodecError(
                    f"{codec_name(_CODEC_OF[module])} body does not decompress within "
                    f"the limit of {limit} bytes: {exc}"
                ) from None
            size = min(limit, size * 2)
            continue
        return bytes(memoryview(out)[:n])


_CODEC_OF = {module: codec for codec, module in _STREAMED.items()}


class CompressionLevels(NamedTuple):
    """A topic's compression.gzip.level, compression.lz4.level and
    compression.zstd.level (KIP-390), Kafka's defaults unless set. gzip's -1 is
    zlib's default level."""

    gzip: int = -1
    lz4: int = 9
    zstd: int = 3


KAFKA_LEVELS = CompressionLevels()


def compress(codec: int, data: bytes, levels: CompressionLevels = KAFKA_LEVELS) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        if levels.gzip == -1:
            return bytes(cramjam.gzip.compress(data))  # zlib's default, 6
        return bytes(cramjam.gzip.compress(data, level=levels.gzip))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.compress(data, level=levels.lz4))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data, level=levels.zstd))
    raise CodecError(f"unknown compression codec {codec}")


def xerial_compress(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """snappy-java's framing, as the Java client and kafka-python write it (for tests)."""
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
    for i in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + block_size]))
        out += _BLOCK_LENGTH.pack(len(block)) + block
    return bytes(out)


def codec_name(codec: int) -> str:
    return {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}.get(codec, f"codec {codec}")


def _xerial_decompress(data: bytes, limit: int) -> bytes:
    if len(data) < _XERIAL_HEADER.size:
        raise CodecError("xerial snappy header is truncated")
    pos = _XERIAL_HEADER.size
    out = bytearray()
    while pos < len(data):
        if len(data) - pos < _BLOCK_LENGTH.size:
            raise CodecError(f"xerial snappy block length at byte {pos} is truncated")
        (size,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += _BLOCK_LENGTH.size
        # A negative or oversized length would loop forever or read past the body.
        if size < 0 or pos + size > len(data):
            raise CodecError(f"xerial snappy block at byte {pos} has bad length {size}")
        block = data[pos : pos + size]
        if len(out) + cramjam.snappy.decompress_raw_len(block) > limit:
            raise CodecError(f"snappy body does not decompress within the limit of {limit} bytes")
        out += cramjam.snappy.decompress_raw(block)
        pos += size
    return bytes(out)
