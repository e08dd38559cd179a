"""Where usage records are and how Spark reads them: local Parquet directly, s3:// via Python.

Spark's Hadoop S3 connector is not available, so `s3://` records are read by a
Spark Python data source (`zonegate_usage`) whose workers fetch objects through
the project's object store; `file://` records are read by Spark's own Parquet
reader. Objects are listed once on the driver so an empty location stops the
job before any work.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from zonegate.usage.schema import ARROW_SCHEMA, SPARK_DDL, UsageInputError, conform

# Spark hands Python data sources microsecond timestamps; records store milliseconds.
SPARK_ARROW_SCHEMA = pa.schema(
    [
        f.with_type(pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f
        for f in ARROW_SCHEMA
    ]
)


@dataclass(frozen=True)
class UsageLocation:
    url: str
    keys: tuple[str, ...]
    total_bytes: int
    endpoint_url: str | None = None


async def _list(url: str, endpoint_url: str | None) -> list[tuple[str, int]]:
    from zonegate.storage.objects import open_object_store

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


def read_usage(spark: Any, loc: UsageLocation, partitions: int) -> Any:
    """A DataFrame of the records at `loc`, in schema-1 columns."""
    if urlsplit(loc.url).scheme == "file":
        base = local_path(loc.url).rstrip("/")
        paths = [f"{base}/{k}" for k in loc.keys]
        return spark.read.schema(SPARK_DDL).parquet(*paths)
    spark.dataSource.register(UsageDataSource)
    return (
        spark.read.format(UsageDataSource.name())
        .option("url", loc.url)
        .option("endpoint_url", loc.endpoint_url or "")
        .option("keys", json.dumps(loc.keys))
        .option("partitions", str(partitions))
        .load()
    )


# pyspark is imported here, not at the top, only so `locate` works without it.
from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceReader,
    InputPartition,
)


class _Keys(InputPartition):
    def __init__(self, keys: list[str]) -> None:
        super().__init__(keys)
        self.keys = keys


class UsageReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.url = options["url"]
        self.endpoint_url = options.get("endpoint_url") or None
        self.keys: list[str] = json.loads(options["keys"])
        self.n = max(1, int(options.get("partitions", "4")))

    def partitions(self) -> list[_Keys]:
        n = min(self.n, len(self.keys))
        return [_Keys(self.keys[i::n]) for i in range(n)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _Keys)
        import io

        import pyarrow.parquet as pq

        from zonegate.storage.objects import open_object_store

        # One object in memory at a time: the loop is driven from this generator.
        loop = asyncio.new_event_loop()
        store = open_object_store(self.url, endpoint_url=self.endpoint_url)
        try:
            for key in partition.keys:
                data = loop.run_until_complete(store.get(key))
                table = conform(pq.read_table(io.BytesIO(data)), f"{self.url.rstrip('/')}/{key}")
                yield from table.cast(SPARK_ARROW_SCHEMA).to_batches()
        finally:
            loop.run_until_complete(store.close())
            loop.close()


class UsageDataSource(DataSource):
    """`spark.read.format("zonegate_usage")`: usage records through the object store."""

    @classmethod
    def name(cls) -> str:
        return "zonegate_usage"

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema: Any) -> UsageReader:
        return UsageReader(dict(self.options))
