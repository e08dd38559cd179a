"""The one object-store protocol every storage role talks to, and its errors.

Backends (`local_store`, `s3_store`) implement `ObjectStore`; retries, timeouts,
request/byte counters and fault injection live once, in
`instrumented.InstrumentedObjectStore`. How a backend lays its objects out is its
own: callers read an object by the key the store gave them (`put_new`) and learn
what a delete removes from `deletion_unit`, never by taking keys apart. A URL
picks and opens a backend in `store_url` (kept apart, so this module imports
no backend and the backends import it without a circle).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class ObjectStoreError(Exception):
    """Base of the errors an object store raises on purpose."""


class ObjectNotFound(ObjectStoreError):
    """The key does not exist. Never retried: asking again will not create it."""

    def __init__(self, key: str) -> None:
        super().__init__(f"object not found: {key!r}")
        self.key = key


class TransientObjectStoreError(ObjectStoreError):
    """A failure worth retrying (throttling, 5xx, connection reset)."""


class PermanentObjectStoreError(ObjectStoreError):
    """A failure retrying cannot fix (access denied, no such bucket, bad request)."""


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    modified_ms: int = 0  # last written (S3's LastModified, a file's mtime); 0 unknown


@dataclass(frozen=True, slots=True)
class DeletionUnit:
    """What deleting an object's unit removes: `key`, the name `delete_many` takes,
    and, when `member_keys` is set, every object whose key lies in that half-open
    range `[first, end)`, in code-point order (the order of SQLite's BINARY and
    PostgreSQL's "C" collation). Most objects are a unit of their own; a store that
    keeps several objects in one place (the local store's pack files) deletes them
    together, and says so here."""

    key: str
    member_keys: tuple[str, str] | None = None


@runtime_checkable
class ObjectStore(Protocol):
    """Flat key -> bytes store. Keys never include the backend's own prefix.

    `get_range` returns the bytes `[start, start + length)` clipped to the end of
    the object (empty when `start` is at or past the end), like S3.
    """

    async def put(self, key: str, data: bytes) -> None: ...

    async def put_new(self, key: str, data: bytes) -> str:
        """Writes a new object, never replaced, and returns the key to read it by:
        `key` itself, or a key of the store's choosing under `key`'s directory (the
        local store appends small objects to pack files). The caller names `key`
        uniquely, as for `put`, and refers to the object only by the key returned."""
        ...

    async def put_if_absent(self, key: str, data: bytes) -> bool: ...

    async def get(self, key: str) -> bytes: ...

    async def get_range(self, key: str, start: int, length: int) -> bytes: ...

    async def delete_many(self, keys: Sequence[str]) -> None: ...

    async def list(self, prefix: str) -> list[ObjectInfo]: ...

    def deletion_unit(self, key: str) -> DeletionUnit:
        """The unit deleting `key`'s object takes with it (object GC deletes units)."""
        ...

    async def close(self) -> None: ...


def check_range(start: int, length: int) -> None:
    if start < 0 or length <= 0:
        raise ValueError(f"bad range start={start} length={length}: need start >= 0, length > 0")
