"""Pure DataFrame transformations from usage records to report tables; no I/O here.

One scan of the records builds `facts` (sums by day, kind, zones, topic and
client), small enough to cache; every table is derived from it. Costs multiply
quantities by `cost_model.usage_rates`, the same coefficients `cost_of_usage`
applies to totals. The Spark session's time zone must be UTC (days are UTC days).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zonegate.cost_model.measured import UsageRates
from zonegate.usage.schema import CLIENT_KINDS

_SUMS = (
    "bytes_in",
    "bytes_out",
    "requests",
    "s3_put_requests",
    "s3_get_requests",
    "s3_other_requests",
    "s3_put_bytes",
    "s3_get_bytes",
)


def facts(records: DataFrame) -> DataFrame:
    """Usage summed by (schema_version, day, kind, node_zone, peer_zone, topic, client_id).

    `stored_byte_seconds` integrates the `stored_bytes` gauge over each interval.
    """
    seconds = (F.col("interval_end").cast("long") - F.col("interval_start").cast("long")).cast(
        "double"
    )
    return records.groupBy(
        "schema_version",
        F.date_format("interval_start", "yyyy-MM-dd").alias("day"),
        "kind",
        "node_zone",
        "peer_zone",
        "topic",
        "client_id",
    ).agg(
        F.count(F.lit(1)).alias("records"),
        *(F.sum(c).alias(c) for c in _SUMS),
        F.sum(F.col("stored_bytes").cast("double") * seconds).alias("stored_byte_seconds"),
    )


def schema_versions(facts_df: DataFrame) -> list[int | None]:
    return [r[0] for r in facts_df.select("schema_version").distinct().collect()]


def flows(facts_df: DataFrame) -> DataFrame:
    """Every transfer once, directed: (day, kind, from_zone, to_zone, topic, client_id, bytes).

    Client traffic is seen only by the node (in: client -> node, out: node -> client);
    a forward_rpc is seen at both ends, so only the sender's bytes_out counts.
    """
    inbound = F.struct(
        F.col("peer_zone").alias("from_zone"),
        F.col("node_zone").alias("to_zone"),
        F.col("bytes_in").alias("bytes"),
    )
    outbound = F.struct(
        F.col("node_zone").alias("from_zone"),
        F.col("peer_zone").alias("to_zone"),
        F.col("bytes_out").alias("bytes"),
    )
    moves = F.when(F.col("kind") == "forward_rpc", F.array(outbound)).otherwise(
        F.array(inbound, outbound)
    )
    return (
        facts_df.filter(F.col("kind").isin(*CLIENT_KINDS, "forward_rpc"))
        .select("day", "kind", "topic", "client_id", F.explode(moves).alias("m"))
        .select("day", "kind", "m.from_zone", "m.to_zone", "topic", "client_id", "m.bytes")
        .filter(F.col("bytes") > 0)
        .withColumn("cross_zone", _crosses(F.col("from_zone"), F.col("to_zone")))
    )


def _crosses(a: Column, b: Column) -> Column:
    return (a != b) & (a != "") & (b != "")


def zone_matrix(flows_df: DataFrame) -> DataFrame:
    """Bytes from zone to zone by kind, same-zone cells included (they cost nothing)."""
    return (
        flows_df.groupBy("kind", "from_zone", "to_zone")
        .agg(F.sum("bytes").alias("bytes"), F.first("cross_zone").alias("cross_zone"))
        .orderBy("kind", "from_zone", "to_zone")
    )


def _transfer_by(flows_df: DataFrame, key: str, rates: UsageRates) -> DataFrame:
    return (
        flows_df.filter("cross_zone")
        .groupBy(F.when(F.col(key) == "", "(none)").otherwise(F.col(key)).alias(key))
        .agg(F.sum("bytes").alias("cross_zone_bytes"))
        .withColumn("transfer_usd", F.col("cross_zone_bytes") * rates.cross_zone_per_byte)
        .orderBy(F.desc("transfer_usd"), key)
    )


def cost_by_topic(flows_df: DataFrame, rates: UsageRates) -> DataFrame:
    """Cross-zone transfer by topic (S3 requests and storage are not per topic in the records)."""
    return _transfer_by(flows_df, "topic", rates)


def cost_by_client(flows_df: DataFrame, rates: UsageRates) -> DataFrame:
    return _transfer_by(flows_df, "client_id", rates)


def _s3_costs(facts_df: DataFrame, rates: UsageRates, key: str) -> DataFrame:
    return facts_df.groupBy(key).agg(
        F.sum(
            F.col("s3_put_requests") * rates.s3_put_per_request
            + F.col("s3_other_requests") * rates.s3_other_per_request
            + F.col("s3_put_bytes") * rates.s3_put_per_byte
        ).alias("s3_put_usd"),
        F.sum(
            F.col("s3_get_requests") * rates.s3_get_per_request
            + F.col("s3_get_bytes") * rates.s3_get_per_byte
        ).alias("s3_get_usd"),
        F.sum(F.col("stored_byte_seconds") * rates.storage_per_byte_second).alias("s3_storage_usd"),
    )


def _with_total(df: DataFrame) -> DataFrame:
    parts = ("transfer_usd", "s3_put_usd", "s3_get_usd", "s3_storage_usd")
    df = df.fillna(0, subset=list(parts))
    total = F.col(parts[0])
    for p in parts[1:]:
        total = total + F.col(p)
    return df.withColumn("total_usd", total)


def cost_by_zone(facts_df: DataFrame, flows_df: DataFrame, rates: UsageRates) -> DataFrame:
    """Each zone pays for what it sends out and what it takes in across zones, and its S3 use."""
    cross = flows_df.filter("cross_zone")
    egress = cross.groupBy(F.col("from_zone").alias("zone")).agg(
        F.sum("bytes").alias("egress_bytes")
    )
    ingress = cross.groupBy(F.col("to_zone").alias("zone")).agg(
        F.sum("bytes").alias("ingress_bytes")
    )
    s3 = _s3_costs(facts_df.withColumnRenamed("node_zone", "zone"), rates, "zone")
    zones = facts_df.select(F.col("node_zone").alias("zone")).distinct()
    out = (
        zones.join(egress, "zone", "left")
        .join(ingress, "zone", "left")
        .join(s3, "zone", "left")
        .fillna(0, subset=["egress_bytes", "ingress_bytes"])
        .withColumn(
            "transfer_usd",
            F.col("egress_bytes") * rates.cross_zone_out_per_byte
            + F.col("ingress_bytes") * rates.cross_zone_in_per_byte,
        )
    )
    return _with_total(out).orderBy("zone")


def daily(facts_df: DataFrame, flows_df: DataFrame, rates: UsageRates) -> DataFrame:
    """Per UTC day: traffic, storage and zonegate's cost by line item."""
    cross = (
        flows_df.filter("cross_zone").groupBy("day").agg(F.sum("bytes").alias("cross_zone_bytes"))
    )
    volume = facts_df.groupBy("day").agg(
        F.sum(F.when(F.col("kind") == "produce_data", F.col("bytes_in"))).alias("produce_bytes"),
        F.sum(F.when(F.col("kind") == "fetch_data", F.col("bytes_out"))).alias("fetch_bytes"),
        F.sum("stored_byte_seconds").alias("stored_byte_seconds"),
    )
    out = (
        volume.join(cross, "day", "left")
        .join(_s3_costs(facts_df, rates, "day"), "day", "left")
        .fillna(0, subset=["cross_zone_bytes", "produce_bytes", "fetch_bytes"])
        .withColumn("transfer_usd", F.col("cross_zone_bytes") * rates.cross_zone_per_byte)
    )
    return _with_total(out).orderBy("day")


def zones_seen(facts_df: DataFrame) -> list[str]:
    rows = facts_df.select("node_zone").union(facts_df.select("peer_zone")).distinct().collect()
    return sorted(r[0] for r in rows if r[0])


@dataclass(frozen=True)
class ReportFrames:
    matrix: DataFrame
    cost_by_topic: DataFrame
    cost_by_client: DataFrame
    cost_by_zone: DataFrame
    daily: DataFrame


def report_frames(facts_df: DataFrame, rates: UsageRates) -> ReportFrames:
    f = flows(facts_df)
    return ReportFrames(
        matrix=zone_matrix(f),
        cost_by_topic=cost_by_topic(f, rates),
        cost_by_client=cost_by_client(f, rates),
        cost_by_zone=cost_by_zone(facts_df, f, rates),
        daily=daily(facts_df, f, rates),
    )
