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

import cramjam

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_BLOCK_LENGTH = struct.Struct(">i")


class CodecError(ValueError):
    """The compressed body cannot be decoded, or the codec is unknown."""


def decompress(codec: int, data: bytes) -> bytes:
    """The body of a batch compressed with `codec` (attribute bits 0-2)."""
    try:
        if codec == 0:
            return data
        if codec == 1:
            return bytes(cramjam.gzip.decompress(data))
        if codec == 2:
            if data.startswith(XERIAL_MAGIC):
                return _xerial_decompress(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == 3:
            return bytes(cramjam.lz4.decompress(data))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(data))
    except CodecError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, or ValueError
        raise CodecError(f"{codec_name(codec)} body does not decompress: {exc}") from exc
    raise CodecError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
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


def _xerial_decompress(data: bytes) -> bytes:
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
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)
