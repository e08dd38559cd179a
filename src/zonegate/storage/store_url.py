"""Opening the object store a URL names: the backend, wrapped in the one retry/metrics layer.

The only module that knows every backend (`file://` is `local_store`, `s3://` is
`s3_store`); kept out of the protocol module so the backends, which import the
protocol, are not imported back by it.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs, unquote, urlsplit

from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.storage.instrumented import InstrumentedObjectStore
from zonegate.storage.local_store import DEFAULT_PACK_MAX_AGE_S, LocalObjectStore
from zonegate.storage.objects import ObjectStore

SUPPORTED_SCHEMES = ("file", "s3")


def open_object_store(
    url: str,
    *,
    endpoint_url: str | None = None,
    ca_bundle: str | None = None,
    region: str | None = None,
    retries: int = 3,
    timeout_s: float = 30.0,
    fsync: bool | None = None,
    gc_orphan_grace_ms: int | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> InstrumentedObjectStore:
    """Open the backend named by `url`, wrapped in the one retry/metrics layer.

    `file:///abs/dir[?fsync=1]` is a local directory; `s3://bucket[/prefix]` is
    S3 (endpoint from `endpoint_url`, else `ZONEGATE_S3_ENDPOINT`, else
    `AWS_ENDPOINT_URL`; its certificate checked against `ca_bundle`, else
    `ZONEGATE_S3_CA_BUNDLE`, else `AWS_CA_BUNDLE`, else the system's CAs; credentials and
    region from the usual AWS variables).
    `gc_orphan_grace_ms`: how old an unreferenced object must be before object GC
    deletes it. A backend whose deletion units take new objects for a while (the
    local store's pack files) stops adding to a unit well within it, so GC never
    deletes one still growing (docs/storage.md).
    `clock`: the node's, for the attempts' timeouts and backoff and the pack files' age.
    """
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
        pack_max_age_s = DEFAULT_PACK_MAX_AGE_S
        if gc_orphan_grace_ms is not None:
            # Half the grace at most: a pack file's objects are written within
            # pack_max_age_s of its opening, so its last append is long past when
            # GC may judge it an orphan by its modification time.
            pack_max_age_s = min(pack_max_age_s, gc_orphan_grace_ms / 2000)
        backend = LocalObjectStore(path, fsync=do_fsync, pack_max_age_s=pack_max_age_s, clock=clock)
    elif parts.scheme == "s3":
        if not parts.netloc:
            raise ValueError(f"s3 URL must name a bucket (s3://bucket/prefix): {url!r}")
        # Imported here: aiobotocore is slow to import and a local store needs none of it.
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
            ca_bundle=ca_bundle or os.environ.get("ZONEGATE_S3_CA_BUNDLE") or None,
            region=region,
            timeout_s=timeout_s,
        )
    else:
        schemes = ", ".join(f"{s}://" for s in SUPPORTED_SCHEMES)
        raise ValueError(f"unsupported object store URL {url!r}: supported schemes are {schemes}")
    return InstrumentedObjectStore(backend, retries=retries, timeout_s=timeout_s, clock=clock)
