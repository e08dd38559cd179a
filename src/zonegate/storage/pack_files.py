"""Pack files: many small objects appended to one local file, each readable by its own key.

The local store writes WAL objects into pack files instead of one file per
object (docs/object-store.md, "Pack files"): an object is one `pwritev` of an
8-byte record header and its bytes at the end of the writer's current pack
file, with no file to create, name or close. A file per object cost an inode
per WAL object, ~700 a second at 20k records/s, and on a filesystem whose
inode allocator is slow (ext4 without a journal after many deletes, measured
at 1.0-1.4 ms of kernel CPU per inode) that alone took a core.

A packed object's key names its pack file and where it lies in it::

    wal/1/3f9c0a1b2c3d4e5f-000002.pack@1048584+31744

(pack file key `@` offset of the object's first byte `+` its length), so any
process reading the directory finds it with no index. Each record is::

    magic  b"ZGPK"   4 bytes
    length uint32    big-endian, the object's length
    bytes            `length` bytes

so a pack file can be walked from its start to list the objects in it, and a
read checks that the header before the offset names the same length (a key
pointing anywhere else is not an object).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from zonegate.storage.objects import DeletionUnit

PACK_SUFFIX = ".pack"
RECORD_MAGIC = b"ZGPK"
RECORD_HEADER = struct.Struct(">4sI")
RECORD_HEADER_SIZE = RECORD_HEADER.size
MAX_PACKED_OBJECT = 2**32 - 1

_PACKED_KEY = re.compile(r"(?P<pack>.+\.pack)@(?P<offset>[0-9]{1,15})\+(?P<length>[0-9]{1,10})")


@dataclass(frozen=True, slots=True)
class PackedKey:
    """A packed object's place: its pack file's key, where its bytes start, their length."""

    pack: str
    offset: int
    length: int

    @property
    def key(self) -> str:
        return f"{self.pack}@{self.offset}+{self.length}"


def parse_packed_key(key: str) -> PackedKey | None:
    """The place a packed object's key names, or None if `key` is not one."""
    m = _PACKED_KEY.fullmatch(key)
    if m is None:
        return None
    offset, length = int(m["offset"]), int(m["length"])
    if offset < RECORD_HEADER_SIZE:
        return None
    return PackedKey(m["pack"], offset, length)


def deletion_unit(key: str) -> DeletionUnit:
    """What deleting `key` removes: for a packed object its whole pack file, whose
    objects' keys are the range [`<pack>@`, `<pack>A`) ('A' follows '@'); else the
    object alone."""
    packed = parse_packed_key(key)
    if packed is None:
        return DeletionUnit(key)
    return DeletionUnit(packed.pack, (packed.pack + "@", packed.pack + "A"))


def is_reserved_name(name: str) -> bool:
    """Whether an ordinary object may not use this last key segment: pack files and
    packed keys belong to the pack writer (a `.pack` file is listed as the objects in it)."""
    return name.endswith(PACK_SUFFIX) or parse_packed_key(name) is not None


def record_header(length: int) -> bytes:
    if not 0 <= length <= MAX_PACKED_OBJECT:
        raise ValueError(f"a packed object holds at most {MAX_PACKED_OBJECT} bytes, not {length}")
    return RECORD_HEADER.pack(RECORD_MAGIC, length)


def header_names(header: bytes, length: int) -> bool:
    """Whether `header` (the 8 bytes before an object) is a record of `length` bytes."""
    if len(header) != RECORD_HEADER_SIZE:
        return False
    magic, declared = RECORD_HEADER.unpack(header)
    return bool(magic == RECORD_MAGIC and declared == length)


def walk_records(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(offset, length) of each whole record of the pack file open as `fd`, `size` bytes.

    Stops at the first place that is not a whole record: the end, an object
    still being written by another process, or the unwritten rest of a pack
    whose writer gave it up after a failed write.
    """
    pos = 0
    while pos + RECORD_HEADER_SIZE <= size:
        head = os.pread(fd, RECORD_HEADER_SIZE, pos)
        if len(head) != RECORD_HEADER_SIZE:
            return
        magic, length = RECORD_HEADER.unpack(head)
        start = pos + RECORD_HEADER_SIZE
        if magic != RECORD_MAGIC or start + length > size:
            return
        yield start, length
        pos = start + length
