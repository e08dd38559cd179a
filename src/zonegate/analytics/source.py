"""Where the usage records are: the objects under a store root or its `usage/` prefix.

Objects are listed once, up front, so an empty or missing location stops the
report before any work, and both engines (`facts`, `spark_engine`) read exactly
the listed objects. Nothing here imports pyspark.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from zonegate.usage.schema import UsageInputError


@dataclass(frozen=True)
class UsageLocation:
    url: str
    keys: tuple[str, ...]
    total_bytes: int
    endpoint_url: str | None = None


async def _list(url: str, endpoint_url: str | None) -> list[tuple[str, int]]:
    from zonegate.storage.store_url import open_object_store

    store = open_object_store(url, endpoint_url=endpoint_url)
    try:
        return [(o.key, o.size) for o in await store.list("")]
    finally:
        await store.close()


def locate(url: str, endpoint_url: str | None = None) -> UsageLocation:
    """List the usage objects under `url` (a store root or its `usage/` prefix)."""
    scheme = urlsplit(url).scheme
    if scheme not in ("file", "s3"):
        raise UsageInputError(
            f"unsupported usage URL {url!r}: use file:///path or s3://bucket/prefix"
        )
    try:
        listed = asyncio.run(_list(url, endpoint_url))
    except FileNotFoundError as exc:
        raise UsageInputError(f"usage location {url} does not exist") from exc
    except Exception as exc:
        raise UsageInputError(f"cannot list usage location {url}: {exc}") from exc
    objects = [(k, s) for k, s in listed if k.endswith(".parquet")]
    if any(k.startswith("usage/") for k, _ in objects):
        objects = [(k, s) for k, s in objects if k.startswith("usage/")]
    if not objects:
        raise UsageInputError(f"no usage records (*.parquet objects) under {url}")
    return UsageLocation(
        url=url,
        keys=tuple(k for k, _ in objects),
        total_bytes=sum(s for _, s in objects),
        endpoint_url=endpoint_url,
    )


def local_path(url: str) -> str:
    return unquote(urlsplit(url).path)
