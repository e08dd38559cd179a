"""The report: sum the usage records into facts, build the tables, write them and the dashboard.

All I/O of the report lives here (writing Parquet, CSV and HTML); reading and
summing the records is the engine's (`facts.arrow_facts` in this process, or
`spark_engine.spark_facts`), the tables are `tables`'s. The output appears in
`out_dir` only when complete: it is built in a sibling staging directory and
renamed into place, so a failed run never leaves a report that looks finished.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from zonegate.analytics import dashboard, tenants
from zonegate.analytics.facts import arrow_facts
from zonegate.analytics.outage import SCHEMA as OUTAGE_SCHEMA
from zonegate.analytics.outage import outage_cross_zone
from zonegate.analytics.progress import Progress
from zonegate.analytics.savings import kafka_for_day, savings
from zonegate.analytics.source import UsageLocation
from zonegate.analytics.tables import SCHEMAS, flows, report_tables, schema_versions
from zonegate.cost_model.measured import usage_rates
from zonegate.cost_model.prices import PriceTable
from zonegate.usage.schema import UsageInputError, check_versions

TABLES = (
    "matrix",
    "cost_by_topic",
    "cost_by_client",
    "cost_by_zone",
    "daily",
    "savings",
    "s3_by_purpose",
    "cost_by_principal",
    "cost_by_principal_client",
    "outage_cross_zone",
)
_SCHEMAS = {**SCHEMAS, **tenants.SCHEMAS, "outage_cross_zone": OUTAGE_SCHEMA}


@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    records: int
    tables: dict[str, list[dict[str, Any]]]


def run_report(
    loc: UsageLocation,
    out_dir: Path,
    prices: PriceTable,
    storage_class: str = "standard",
    progress: Progress | None = None,
    spark: Any = None,
) -> ReportResult:
    """Build the report for `loc` into `out_dir`; raise `UsageInputError` on bad input.

    With `spark` (a SparkSession) the records are summed by a Spark job, else in
    this process; the tables and the files written are the same either way.
    """
    progress = progress or Progress(5)
    check_out_dir(out_dir)
    rates = usage_rates(prices, storage_class)
    engine = "Spark" if spark is not None else "in this process"
    progress.step(
        f"reading {len(loc.keys):,} usage objects ({loc.total_bytes:,} bytes) from {loc.url} "
        f"({engine})"
    )
    if spark is not None:
        from zonegate.analytics.spark_engine import spark_facts

        facts = spark_facts(spark, loc)
    else:
        facts = arrow_facts(loc, lambda n: progress.update(f"{n:,} records summed"))
    progress.step(
        f"checking the records' schema versions ({facts.num_rows:,} groups by day, zone, "
        "topic and client)"
    )
    versions = schema_versions(facts)
    if None in versions:
        raise UsageInputError(f"usage records under {loc.url} lack a schema_version")
    check_versions([v for v in versions if v is not None], loc.url)
    progress.step("building the zone matrix and costs by topic, client, tenant, zone and day")
    t = report_tables(facts, rates)
    tables = {
        "matrix": t.matrix,
        "cost_by_topic": t.cost_by_topic,
        "cost_by_client": t.cost_by_client,
        "cost_by_zone": t.cost_by_zone,
        "daily": t.daily,
        "s3_by_purpose": t.s3_by_purpose,
    }
    flows_t = flows(facts)
    for name, keys in (
        ("cost_by_principal", ["principal"]),
        ("cost_by_principal_client", ["principal", "client_id"]),
    ):
        tables[name] = tenants.cost_by(facts, flows_t, rates, keys)
    tables["outage_cross_zone"] = outage_cross_zone(facts, rates)
    progress.step("pricing the same traffic as Apache Kafka")
    for row in tables["daily"]:
        row["kafka_usd"] = kafka_for_day(row, len(t.zones), prices, fetch_from_follower=False).total
        row["kafka_fff_usd"] = kafka_for_day(
            row, len(t.zones), prices, fetch_from_follower=True
        ).total
    tables["savings"] = savings(tables["daily"], len(t.zones), prices).rows()
    progress.step(f"writing tables (Parquet, CSV) and the dashboard to {out_dir}")
    staging = _staging_dir(out_dir)
    try:
        for name in TABLES:
            _write_table(tables[name], _SCHEMAS.get(name), staging, name)
        html = dashboard.render(
            dashboard.DashboardData(
                usage_url=loc.url,
                generated_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                prices=prices,
                storage_class=storage_class,
                records=t.records,
                objects=len(loc.keys),
                zones=t.zones,
                matrix=tables["matrix"],
                by_topic=tables["cost_by_topic"],
                by_client=tables["cost_by_client"],
                by_zone=tables["cost_by_zone"],
                daily=tables["daily"],
                savings=tables["savings"],
                by_principal=tables["cost_by_principal"],
                by_principal_client=tables["cost_by_principal_client"],
                outage=tables["outage_cross_zone"],
            )
        )
        (staging / "dashboard.html").write_text(html, encoding="utf-8")
        (staging / "report.json").write_text(
            json.dumps(
                {
                    "usage": loc.url,
                    "records": t.records,
                    "objects": len(loc.keys),
                    "zones": t.zones,
                    "provider": prices.provider,
                    "region": prices.region,
                    "storage_class": storage_class,
                    "s3_request_usd_by_purpose": {
                        r["purpose"]: r["request_usd"] for r in t.s3_by_purpose
                    },
                    "cost_by_principal_usd": {
                        r["principal"]: r["total_usd"] for r in tables["cost_by_principal"]
                    },
                    "outage_cross_zone_bytes": _by_zone(tables["outage_cross_zone"]),
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
    progress.done(f"report of {t.records:,} usage records ({facts.num_rows:,} groups) in {out_dir}")
    return ReportResult(out_dir, t.records, tables)


def _by_zone(outage: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in outage:
        out[r["zone"]] = out.get(r["zone"], 0) + r["bytes"]
    return out


def _write_table(
    rows: list[dict[str, Any]], schema: pa.Schema | None, root: Path, name: str
) -> None:
    """One Parquet file and one CSV file (with a header) per table, empty ones included."""
    import pyarrow.csv
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows, schema=schema)
    for kind in ("parquet", "csv"):
        (root / kind / name).mkdir(parents=True)
    pq.write_table(table, root / "parquet" / name / "part-00000.parquet")
    pyarrow.csv.write_csv(table, root / "csv" / name / "part-00000.csv")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _cannot_write(out_dir: Path, exc: OSError) -> UsageInputError:
    reason = (exc.strerror or str(exc)).lower()
    return UsageInputError(f"cannot write the report to {out_dir}: {reason}")


def _staging_dir(out_dir: Path) -> Path:
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    except OSError as exc:
        raise _cannot_write(out_dir, exc) from None
    # mkdtemp makes it private (0700); the report is for whoever may read the user's files.
    staging.chmod(0o777 & ~_umask())
    return staging


def check_out_dir(out_dir: Path) -> None:
    """Refuse a directory that is neither new, empty nor an earlier report, or that cannot be
    written: before any record is read, not after minutes of work."""
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir.parent):
            pass
    except OSError as exc:
        raise _cannot_write(out_dir, exc) from None
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
