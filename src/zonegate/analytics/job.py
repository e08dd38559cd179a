"""The report job: read usage records, build the tables, write them and the dashboard.

All I/O of the report lives here (reading the records, writing Parquet, CSV and
HTML); the transformations are in `transform`. The output appears in `out_dir`
only when complete: it is built in a sibling staging directory and renamed
into place, so a failed run never leaves a report that looks finished.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from zonegate.analytics import dashboard, transform
from zonegate.analytics.progress import Progress
from zonegate.analytics.savings import kafka_for_day, savings
from zonegate.analytics.source import UsageLocation, read_usage
from zonegate.cost_model.measured import usage_rates
from zonegate.cost_model.prices import PriceTable
from zonegate.usage.schema import UsageInputError, check_versions

TABLES = ("matrix", "cost_by_topic", "cost_by_client", "cost_by_zone", "daily", "savings")


@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    records: int
    tables: dict[str, list[dict[str, Any]]]


def spark_session(master: str = "local[*]", app: str = "zonegate-report") -> SparkSession:
    # Spark starts its Python workers with `python3` from PATH unless told otherwise;
    # run from a virtual environment that is not activated, that Python lacks
    # zonegate (the data source lives in it), and every read fails.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.showConsoleProgress", "true")
        .getOrCreate()
    )


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


def run_report(
    spark: SparkSession,
    loc: UsageLocation,
    out_dir: Path,
    prices: PriceTable,
    storage_class: str = "standard",
    progress: Progress | None = None,
) -> ReportResult:
    """Build the report for `loc` into `out_dir`; raise `UsageInputError` on bad input."""
    progress = progress or Progress(5)
    check_out_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    rates = usage_rates(prices, storage_class)
    partitions = max(2, spark.sparkContext.defaultParallelism)
    progress.step(
        f"reading {len(loc.keys):,} usage objects ({loc.total_bytes:,} bytes) from {loc.url}"
    )
    records = read_usage(spark, loc, partitions)
    facts = transform.facts(records).cache()
    try:
        progress.step("summing records by day, kind, zone, topic and client")
        n_records = int(facts.agg({"records": "sum"}).collect()[0][0] or 0)  # the one scan
        versions = transform.schema_versions(facts)
        if None in versions:
            raise UsageInputError(f"usage records under {loc.url} lack a schema_version")
        check_versions([v for v in versions if v is not None], loc.url)
        progress.step("building the zone matrix and costs by topic, client, zone and day")
        frames = transform.report_frames(facts, rates)
        zones = transform.zones_seen(facts)
        tables = {
            "matrix": _rows(frames.matrix),
            "cost_by_topic": _rows(frames.cost_by_topic),
            "cost_by_client": _rows(frames.cost_by_client),
            "cost_by_zone": _rows(frames.cost_by_zone),
            "daily": _rows(frames.daily),
        }
    finally:
        facts.unpersist()
    progress.step("pricing the same traffic as Apache Kafka")
    for row in tables["daily"]:
        row["kafka_usd"] = kafka_for_day(row, len(zones), prices, fetch_from_follower=False).total
        row["kafka_fff_usd"] = kafka_for_day(
            row, len(zones), prices, fetch_from_follower=True
        ).total
    tables["savings"] = savings(tables["daily"], len(zones), prices).rows()
    progress.step(f"writing tables (Parquet, CSV) and the dashboard to {out_dir}")
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    try:
        for name in TABLES:
            _write_table(spark, tables[name], staging, name)
        html = dashboard.render(
            dashboard.DashboardData(
                usage_url=loc.url,
                generated_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                prices=prices,
                storage_class=storage_class,
                records=n_records,
                objects=len(loc.keys),
                zones=zones,
                matrix=tables["matrix"],
                by_topic=tables["cost_by_topic"],
                by_client=tables["cost_by_client"],
                by_zone=tables["cost_by_zone"],
                daily=tables["daily"],
                savings=tables["savings"],
            )
        )
        (staging / "dashboard.html").write_text(html, encoding="utf-8")
        (staging / "report.json").write_text(
            json.dumps(
                {
                    "usage": loc.url,
                    "records": n_records,
                    "objects": len(loc.keys),
                    "zones": zones,
                    "provider": prices.provider,
                    "region": prices.region,
                    "storage_class": storage_class,
                    "complete": True,
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        _replace_dir(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    progress.done(f"report of {n_records:,} records in {out_dir}")
    return ReportResult(out_dir, n_records, tables)


def _write_table(spark: SparkSession, rows: list[dict[str, Any]], root: Path, name: str) -> None:
    """Small tables: built on the driver, one Parquet file and one CSV file each."""
    if not rows:
        (root / f"{name}.empty").write_text("no rows\n")
        return
    df = spark.createDataFrame(rows).select(*rows[0].keys()).coalesce(1)
    df.write.parquet(str(root / "parquet" / name))
    df.write.option("header", "true").csv(str(root / "csv" / name))


def check_out_dir(out_dir: Path) -> None:
    """Refuse to overwrite a directory that is neither empty nor an earlier report."""
    if out_dir.exists() and not (
        out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / "report.json").exists())
    ):
        raise UsageInputError(
            f"{out_dir} exists and is not an earlier report: choose an empty or new directory"
        )


def _replace_dir(staging: Path, out_dir: Path) -> None:
    check_out_dir(out_dir)
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        out_dir.rename(old)
        staging.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
        return
    staging.rename(out_dir)
