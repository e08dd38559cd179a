"""The Spark engine: the records' one scan (`facts`) as a Spark job, for inputs that need one.

Only the scan runs on Spark: one job reads the records and sums them into facts,
which come back to the driver as Arrow; the report tables are built from them
there (`tables`), as the in-process engine does. `file://` records are read by
Spark's Parquet reader; `s3://` records by a Spark Python data source
(`zonegate_usage`) whose workers fetch objects through the project's object
store, since Spark's Hadoop S3 connector is not available.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import Iterator
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from zonegate.analytics.facts import FACTS_SCHEMA, LEADER_SUMS, RECORD_SUMS
from zonegate.analytics.source import UsageLocation, local_path
from zonegate.usage.schema import ARROW_SCHEMA, OUTAGE, SPARK_DDL, USAGE_PREFIX, conform

# Spark hands Python data sources microsecond timestamps; records store milliseconds.
SPARK_ARROW_SCHEMA = pa.schema(
    [
        f.with_type(pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f
        for f in ARROW_SCHEMA
    ]
)


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def spark_session(
    master: str = "local[*]", app: str = "zonegate-report", *, console_progress: bool = False
) -> SparkSession:
    """A session for the report; `console_progress` shows Spark's live stage bar (a terminal)."""
    # Spark starts its Python workers with `python3` from PATH unless told otherwise;
    # run from a virtual environment that is not activated, that Python lacks
    # zonegate (the data source lives in it), and every read fails.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = resources.files("zonegate.analytics").joinpath("log4j2.properties")
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "true" if console_progress else "false")
        # Spark's own INFO/WARN start-up lines are noise to a report's user; errors remain.
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        # Usage objects are small (one per node per minute): at Spark's default 4 MB
        # "cost" to open a file, a day of them is planned as hundreds of tiny tasks.
        .config("spark.sql.files.openCostInBytes", str(64 * 1024))
    )
    if is_local(master):
        # Everything runs in this process: bind the loopback address instead of whatever
        # the host name resolves to (Spark warns, then binds a public interface), and
        # skip the web UI a run of seconds has no use for.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
            .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
            .config("spark.ui.enabled", "false")
            # The facts are small; 200 shuffle partitions are 200 tasks on a few cores.
            .config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 2)))
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_usage(spark: SparkSession, loc: UsageLocation, partitions: int) -> DataFrame:
    """A DataFrame of the records at `loc`, in the current schema's columns (a schema-1
    object's missing ones null)."""
    if urlsplit(loc.url).scheme == "file":
        # One directory listed recursively, not one path per object: Spark lists each
        # given path on its own (a listing job past 32 paths), which took most of a
        # report's time at thousands of objects. The directory holds exactly the listed
        # objects (`locate` takes usage/ when there is one); names starting with "." or
        # "_", such as the local store's temporary files, are skipped by Spark.
        base = local_path(loc.url).rstrip("/")
        under_usage = all(k.startswith(USAGE_PREFIX) for k in loc.keys)
        root = f"{base}/{USAGE_PREFIX}" if under_usage else base
        return (
            spark.read.schema(SPARK_DDL)
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.parquet")
            .parquet(root)
        )
    spark.dataSource.register(UsageDataSource)
    return (
        spark.read.format(UsageDataSource.name())
        .option("url", loc.url)
        .option("endpoint_url", loc.endpoint_url or "")
        .option("keys", json.dumps(loc.keys))
        .option("partitions", str(partitions))
        .load()
    )


def spark_facts(spark: SparkSession, loc: UsageLocation) -> pa.Table:
    """Facts (`facts.FACTS_SCHEMA`) of the records at `loc`, summed by one Spark job."""
    partitions = max(2, spark.sparkContext.defaultParallelism)
    records = read_usage(spark, loc, partitions)
    seconds = (F.unix_millis("interval_end") - F.unix_millis("interval_start")) / 1000.0
    # As facts.facts_of: client-to-leader bytes across zones where both zones are known
    # (schema 2), and the produce and fetch bytes where they are not.
    both = F.col("bytes_in") + F.col("bytes_out")
    data = F.col("kind").isin("produce_data", "fetch_data")
    known = (
        (F.col("schema_version") >= 2)
        & (F.coalesce(F.col("client_zone"), F.lit("")) != "")
        & (F.coalesce(F.col("leader_zone"), F.lit("")) != "")
    )
    crossed = data & known & (F.col("client_zone") != F.col("leader_zone"))
    records = records.withColumn(
        "leader_cross_bytes", F.when(crossed, both).otherwise(F.lit(0))
    ).withColumn("leader_unknown_bytes", F.when(data & ~known, both).otherwise(F.lit(0)))
    facts = records.groupBy(
        "schema_version",
        F.date_format("interval_start", "yyyy-MM-dd").alias("day"),
        "kind",
        "node_zone",
        "peer_zone",
        "topic",
        "client_id",
        F.coalesce(F.col("s3_purpose"), F.lit("")).alias("s3_purpose"),
        F.coalesce(F.col("principal"), F.lit("")).alias("principal"),
        F.when(
            F.coalesce(F.col("cross_zone_reason"), F.lit("")) == OUTAGE,
            F.date_format("interval_start", "yyyy-MM-dd HH:00"),
        )
        .otherwise(F.lit(""))
        .alias("outage_window"),
    ).agg(
        F.count(F.lit(1)).alias("records"),
        *(F.coalesce(F.sum(c), F.lit(0)).alias(c) for c in (*RECORD_SUMS, *LEADER_SUMS)),
        F.coalesce(F.sum(F.col("stored_bytes").cast("double") * seconds), F.lit(0.0)).alias(
            "stored_byte_seconds"
        ),
    )
    return facts.toArrow().select(FACTS_SCHEMA.names).cast(FACTS_SCHEMA)


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
        import pyarrow.parquet as pq

        from zonegate.storage.store_url import open_object_store

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
