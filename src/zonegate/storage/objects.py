"""The one object-store protocol every storage role talks to, and its errors.

Backends (`local_store`, `s3_store`) implement `ObjectStore` and only translate
calls; retries, timeouts, request/byte counters and fault injection live once,
in `instrumented.InstrumentedObjectStore`. A URL picks and opens a backend in
`store_url` (kept apart, so this module imports no backend and the backends
import it without a circle).
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


@runtime_checkable
class ObjectStore(Protocol):
    """Flat key -> bytes store. Keys never include the backend's own prefix.

    `get_range` returns the bytes `[start, start + length)` clipped to the end of
    the object (empty when `start` is at or past the end), like S3.
    """

    async def put(self, key: str, data: bytes) -> None: ...

    async def put_if_absent(self, key: str, data: bytes) -> bool: ...

    async def get(self, key: str) -> bytes: ...

    async def get_range(self, key: str, start: int, length: int) -> bytes: ...

    async def delete_many(self, keys: Sequence[str]) -> None: ...

    async def list(self, prefix: str) -> list[ObjectInfo]: ...

    async def close(self) -> None: ...


@runtime_checkable
class PackingObjectStore(ObjectStore, Protocol):
    """A store that can also append small objects to shared pack files (the local
    store: docs/object-store.md, "Pack files"). `put_packed` returns the key the
    object can be read by; it is not chosen by the caller."""

    @property
    def packs(self) -> bool: ...

    async def put_packed(self, prefix: str, data: bytes) -> str: ...


def check_range(start: int, length: int) -> None:
    if start < 0 or length <= 0:
        raise ValueError(f"bad range start={start} length={length}: need start >= 0, length > 0")
