"""Encoding and decoding of the self-describing WAL object (docs/wal-format.md, version 1).

Pure functions over bytes except `read_footer_from_store`, which only decides
which byte ranges to fetch. The layout is specified in the doc; change both
together, and bump the version for any change a version-1 reader would misread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from zonegate.storage.objects import ObjectNotFound, ObjectStore

MAGIC = b"ZGWL"
FORMAT_VERSION = 1

# magic, version, header_length, node_id, reserved, created_ms
_HEADER = struct.Struct(">4sHHiIq")
# node_id, entry_count, created_ms
_FOOTER_HEAD = struct.Struct(">iIq")
# stream_id, position, length
_ENTRY = struct.Struct(">qQI")
# footer_length, version, reserved, footer_crc, reserved, object_crc, magic
_TRAILER = struct.Struct(">IHHIII4s")

HEADER_SIZE = _HEADER.size
ENTRY_SIZE = _ENTRY.size
TRAILER_SIZE = _TRAILER.size
# How much of the tail the first ranged read asks for: the trailer plus room
# for ~200 entries, which covers a typical 8 MiB object of ~40 KiB batches.
TAIL_READ_BYTES = 4096 + TRAILER_SIZE

# Offsets within the trailer (see the doc's table).
_FOOTER_CRC_AT = 8
_OBJECT_CRC_AT = 16  # last field before the magic: every other byte is covered


class CorruptWalObject(Exception):
    """The bytes are not a valid WAL object; the message says what is wrong."""

    def __init__(self, reason: str, key: str | None = None) -> None:
        super().__init__(f"corrupt WAL object {key!r}: {reason}" if key else reason)
        self.reason = reason
        self.key = key


@dataclass(frozen=True)
class WalEntryLocation:
    """Where one appended entry lives: the leader indexes exactly this."""

    object_key: str
    stream_id: int
    position: int
    length: int


@dataclass(frozen=True)
class WalFooterEntry:
    stream_id: int
    position: int
    length: int


@dataclass(frozen=True)
class WalObjectFooter:
    format_version: int
    node_id: int
    created_ms: int
    entries: tuple[WalFooterEntry, ...]
    object_size: int
    body_start: int
    body_end: int  # where the footer starts
    object_crc_checked: bool  # False when only the tail was read


def encode_wal_object(
    node_id: int,
    created_ms: int,
    entries: Sequence[tuple[int, bytes]],
    *,
    object_key: str,
) -> tuple[bytes, list[WalEntryLocation]]:
    """The object's bytes and where each `(stream_id, data)` entry landed, in order."""
    parts: list[bytes] = [_HEADER.pack(MAGIC, FORMAT_VERSION, HEADER_SIZE, node_id, 0, created_ms)]
    footer = bytearray(_FOOTER_HEAD.pack(node_id, len(entries), created_ms))
    locations: list[WalEntryLocation] = []
    position = HEADER_SIZE
    for stream_id, data in entries:
        parts.append(data)
        footer += _ENTRY.pack(stream_id, position, len(data))
        locations.append(WalEntryLocation(object_key, stream_id, position, len(data)))
        position += len(data)
    trailer_head = struct.pack(">IHH", len(footer), FORMAT_VERSION, 0)
    footer_crc = crc32c.crc32c(trailer_head, crc32c.crc32c(footer))
    parts.append(bytes(footer))
    parts.append(trailer_head + struct.pack(">II", footer_crc, 0))
    object_crc = 0
    for p in parts:
        object_crc = crc32c.crc32c(p, object_crc)
    parts.append(struct.pack(">I4s", object_crc, MAGIC))
    return b"".join(parts), locations


def _parse_tail(tail: bytes, object_size: int, key: str | None) -> tuple[int, bytes | None, bytes]:
    """Check the trailer at the end of `tail`: (footer_length, footer or None if
    `tail` does not reach back to the footer's start, trailer)."""
    if object_size < HEADER_SIZE + _FOOTER_HEAD.size + TRAILER_SIZE:
        raise CorruptWalObject(f"object too short ({object_size} bytes)", key)
    trailer = tail[-TRAILER_SIZE:]
    footer_length, version, _, footer_crc, _, _, magic = _TRAILER.unpack(trailer)
    if magic != MAGIC:
        raise CorruptWalObject(f"bad trailer magic {magic!r}", key)
    if version != FORMAT_VERSION:
        raise CorruptWalObject(f"unsupported WAL format version {version}", key)
    if footer_length > object_size - HEADER_SIZE - TRAILER_SIZE:
        raise CorruptWalObject(
            f"footer length {footer_length} does not fit in {object_size} bytes", key
        )
    if len(tail) < TRAILER_SIZE + footer_length:
        return footer_length, None, trailer
    footer = tail[len(tail) - TRAILER_SIZE - footer_length : len(tail) - TRAILER_SIZE]
    if crc32c.crc32c(trailer[:_FOOTER_CRC_AT], crc32c.crc32c(footer)) != footer_crc:
        raise CorruptWalObject("footer checksum mismatch", key)
    return footer_length, footer, trailer


def _parse_footer(
    footer: bytes, object_size: int, key: str | None, object_crc_checked: bool
) -> WalObjectFooter:
    if len(footer) < _FOOTER_HEAD.size:
        raise CorruptWalObject(f"footer too short ({len(footer)} bytes)", key)
    node_id, count, created_ms = _FOOTER_HEAD.unpack_from(footer)
    if len(footer) != _FOOTER_HEAD.size + count * ENTRY_SIZE:
        raise CorruptWalObject(f"footer length {len(footer)} does not match {count} entries", key)
    body_end = object_size - TRAILER_SIZE - len(footer)
    entries: list[WalFooterEntry] = []
    for i in range(count):
        stream_id, position, length = _ENTRY.unpack_from(footer, _FOOTER_HEAD.size + i * ENTRY_SIZE)
        if position < HEADER_SIZE or position + length > body_end:
            raise CorruptWalObject(
                f"entry {i} [{position}, {position + length}) outside body "
                f"[{HEADER_SIZE}, {body_end})",
                key,
            )
        entries.append(WalFooterEntry(stream_id, position, length))
    return WalObjectFooter(
        format_version=FORMAT_VERSION,
        node_id=node_id,
        created_ms=created_ms,
        entries=tuple(entries),
        object_size=object_size,
        body_start=HEADER_SIZE,
        body_end=body_end,
        object_crc_checked=object_crc_checked,
    )


def decode_wal_footer(data: bytes, *, key: str | None = None) -> WalObjectFooter:
    """Validate a whole WAL object (both checksums included) and return its footer."""
    size = len(data)
    _, footer, trailer = _parse_tail(data, size, key)
    assert footer is not None  # the whole object reaches back to the footer
    magic, version, header_length, node_id, _, created_ms = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptWalObject(f"bad header magic {magic!r}", key)
    if version != FORMAT_VERSION:
        raise CorruptWalObject(f"unsupported WAL format version {version}", key)
    if header_length != HEADER_SIZE:
        raise CorruptWalObject(f"header length {header_length}, expected {HEADER_SIZE}", key)
    (object_crc,) = struct.unpack_from(">I", trailer, _OBJECT_CRC_AT)
    covered = memoryview(data)[: size - TRAILER_SIZE + _OBJECT_CRC_AT]
    if crc32c.crc32c(covered) != object_crc:
        raise CorruptWalObject("object checksum mismatch", key)
    result = _parse_footer(footer, size, key, object_crc_checked=True)
    if (result.node_id, result.created_ms) != (node_id, created_ms):
        raise CorruptWalObject("header and footer disagree on node id or creation time", key)
    return result


async def read_footer_from_store(
    store: ObjectStore, key: str, *, size: int | None = None
) -> WalObjectFooter:
    """Read and check an object's footer with one ranged GET (two for big footers).

    `size` is the object length, as a LIST gives it; when unknown it costs a
    LIST of the key. The object checksum is not verified (that needs every byte).
    """
    if size is None:
        infos = [i for i in await store.list(key) if i.key == key]
        if not infos:
            raise ObjectNotFound(key)
        size = infos[0].size
    first = min(size, TAIL_READ_BYTES)
    tail = await store.get_range(key, size - first, first) if first else b""
    if len(tail) != first:
        raise CorruptWalObject(f"object shorter than its listed size {size}", key)
    footer_length, footer, _ = _parse_tail(tail, size, key)
    if footer is None:
        missing = TRAILER_SIZE + footer_length - len(tail)
        start = size - len(tail) - missing
        more = await store.get_range(key, start, missing)
        if len(more) != missing:
            raise CorruptWalObject(f"object shorter than its listed size {size}", key)
        _, footer, _ = _parse_tail(more + tail, size, key)
        assert footer is not None
    return _parse_footer(footer, size, key, object_crc_checked=False)
