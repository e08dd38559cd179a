"""`zonegate report`: the Spark cost report over the nodes' usage records.

pyspark is imported only when the command runs, so the broker's commands work
without the `report` extra installed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "report",
        help="cross-zone traffic and cost report (Spark) from usage records",
        description=(
            "Read the nodes' usage records and write tables (Parquet and CSV) and a static "
            "HTML dashboard: zone-to-zone traffic, cost by topic, client, zone and day, and "
            "the savings against Apache Kafka for the same traffic. See docs/report.md."
        ),
    )
    p.add_argument(
        "--usage",
        metavar="URL",
        required=True,
        help="where the records are: the object store's root or its usage/ prefix, "
        "file:///path (zonegate serve's: file://$PWD/zonegate-data/objects) or "
        "s3://bucket/prefix (required)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        required=True,
        type=Path,
        help="directory for the report: new, empty or an earlier report (required)",
    )
    p.add_argument(
        "--master",
        default="local[*]",
        help="Spark master, e.g. spark://host:7077 (default local[*]: Spark in this "
        "process, using every core)",
    )
    p.add_argument("--provider", default="aws", help="price table: aws, gcp or azure (default aws)")
    p.add_argument(
        "--region",
        default=None,
        help="region of the price table (default: the provider's first region, us-east-1 for aws)",
    )
    p.add_argument(
        "--storage-class",
        choices=("standard", "express"),
        default="standard",
        help="S3 Standard or S3 Express One Zone prices (default standard)",
    )
    p.add_argument(
        "--s3-endpoint",
        metavar="URL",
        default=os.environ.get("ZONEGATE_S3_ENDPOINT"),
        help="S3 endpoint URL for s3:// records (default: $ZONEGATE_S3_ENDPOINT, else AWS)",
    )
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"zonegate report: {message}", file=sys.stderr)
    print("zonegate report: no report was written", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from zonegate.analytics.schema import UsageInputError
    from zonegate.cost_model.price_tables import default_region, price_table
    from zonegate.cost_model.prices import UnknownPrice

    try:
        prices = price_table(args.provider, args.region or default_region(args.provider))
        prices.object_storage(args.storage_class)
    except UnknownPrice as exc:
        return _fail(str(exc))
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        return _fail("pyspark is not installed: pip install 'zonegate[report]'")
    from zonegate.analytics.job import check_out_dir, run_report, spark_session
    from zonegate.analytics.source import locate

    try:
        check_out_dir(args.out)
        loc = locate(args.usage, args.s3_endpoint)
    except UsageInputError as exc:
        return _fail(str(exc))
    spark = spark_session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        run_report(spark, loc, args.out, prices, args.storage_class)
    except UsageInputError as exc:
        return _fail(str(exc))
    except Exception as exc:  # Spark wraps worker errors; show ours if it is one
        ours = worker_error(str(exc))
        if ours is None:
            raise
        return _fail(ours)
    finally:
        spark.stop()
    print(f"report written to {args.out} (open {args.out / 'dashboard.html'})")
    return 0


_OURS = re.compile(r"(?:UnknownSchemaVersion|UsageInputError): (.+)")


def worker_error(text: str) -> str | None:
    """Our own input error raised inside a Spark worker, found in Spark's wrapped message."""
    m = _OURS.search(text)
    return m.group(1).strip() if m else None
