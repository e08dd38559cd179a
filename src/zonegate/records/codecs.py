"""Decompression and compression of batch bodies with cramjam, for every Kafka codec.

Snappy comes in two framings: raw (librdkafka, aiokafka) and the Java client's
xerial framing (magic `\\x82SNAPPY\\x00`, then length-prefixed raw blocks), which
kafka-python can also write. Both are read; raw is written. LZ4 is the LZ4
frame format, as Kafka uses since magic v1.
"""

from __future__ import annotations

import struct

import cramjam

_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        if data.startswith(_XERIAL_MAGIC):
            return _xerial_decompress(data)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


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
    raise ValueError(f"unknown compression codec {codec}")


def _xerial_decompress(data: bytes) -> bytes:
    pos = 16  # magic (8), version (4), compatible version (4)
    out = bytearray()
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)
