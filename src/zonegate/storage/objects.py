"""The one object-store protocol every storage role talks to, and how a URL picks a backend.

Backends (`local_store`, `s3_store`) implement `ObjectStore` and only translate
calls; retries, timeouts, request/byte counters and fault injection live once,
in `instrumented.InstrumentedObjectStore`, which is what `open_object_store`
returns.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import parse_qs, unquote, urlsplit

if TYPE_CHECKING:
    from zonegate.storage.instrumented import InstrumentedObjectStore

SUPPORTED_SCHEMES = ("file", "s3")


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


def open_object_store(
    url: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    retries: int = 3,
    timeout_s: float = 30.0,
    fsync: bool | None = None,
    pack_max_age_s: float | None = None,
) -> InstrumentedObjectStore:
    """Open the backend named by `url`, wrapped in the one retry/metrics layer.

    `file:///abs/dir[?fsync=1]` is a local directory; `s3://bucket[/prefix]` is
    S3 (endpoint from `endpoint_url`, else `ZONEGATE_S3_ENDPOINT`, else
    `AWS_ENDPOINT_URL`; credentials and region from the usual AWS variables).
    `pack_max_age_s`: how long a local pack file takes new objects (object GC must
    not delete one that may still grow: its orphan grace is longer).
    """
    from zonegate.storage.instrumented import InstrumentedObjectStore

    parts = urlsplit(url)
    backend: ObjectStore
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URL must name a local absolute path: {url!r}")
        path = unquote(parts.path)
        if not os.path.isabs(path):
            raise ValueError(f"file URL must name an absolute path: {url!r}")
        query = parse_qs(parts.query)
        do_fsync = fsync if fsync is not None else query.get("fsync", ["0"])[-1] in ("1", "true")
        from zonegate.storage.local_store import LocalObjectStore

        backend = (
            LocalObjectStore(path, fsync=do_fsync)
            if pack_max_age_s is None
            else LocalObjectStore(path, fsync=do_fsync, pack_max_age_s=pack_max_age_s)
        )
    elif parts.scheme == "s3":
        if not parts.netloc:
            raise ValueError(f"s3 URL must name a bucket (s3://bucket/prefix): {url!r}")
        from zonegate.storage.s3_store import S3ObjectStore

        endpoint = (
            endpoint_url
            or os.environ.get("ZONEGATE_S3_ENDPOINT")
            or os.environ.get("AWS_ENDPOINT_URL")
            or None
        )
        backend = S3ObjectStore(
            parts.netloc,
            parts.path.lstrip("/"),
            endpoint_url=endpoint,
            region=region,
            timeout_s=timeout_s,
        )
    else:
        schemes = ", ".join(f"{s}://" for s in SUPPORTED_SCHEMES)
        raise ValueError(f"unsupported object store URL {url!r}: supported schemes are {schemes}")
    return InstrumentedObjectStore(backend, retries=retries, timeout_s=timeout_s)
