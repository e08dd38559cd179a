"""`zonegate report`: the cost report over the nodes' usage records.

pyspark is imported only when the Spark engine runs, so the broker's commands,
and reports small enough for the in-process engine, work without the `report`
extra installed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from zonegate.cost_model.cli import add_price_arguments, chosen_prices

# On one machine the in-process engine was faster at every size measured, up to
# 278 MB of records (docs/report.md, "How long it takes"); past this much a single
# process's run grows to minutes, and Spark can spread the scan over more cores or
# a cluster. Either engine makes the same report.
ARROW_MAX_BYTES = 1 << 30


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "report",
        help="cross-zone traffic and cost report from usage records (in this process, or on "
        "Spark for large inputs)",
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
        "--engine",
        choices=("auto", "arrow", "spark"),
        default="auto",
        help="what sums the records: arrow (in this process, streaming; no Java) or spark "
        "(a Spark job; needs the report extra and Java 17+); auto takes spark when --master "
        f"is given or the records exceed {ARROW_MAX_BYTES >> 30} GiB, else arrow "
        "(default auto)",
    )
    p.add_argument(
        "--master",
        default=None,
        help="Spark master, e.g. spark://host:7077 or local[4]; giving one runs the Spark "
        "engine (default: local[*], Spark in this process on every core, when Spark runs)",
    )
    add_price_arguments(p)
    p.add_argument(
        "--s3-endpoint",
        metavar="URL",
        default=os.environ.get("ZONEGATE_S3_ENDPOINT"),
        help="S3 endpoint URL for s3:// records (default: $ZONEGATE_S3_ENDPOINT, else AWS)",
    )
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"zonegate report: {message} (no report was written)", file=sys.stderr)
    return 2


def _endpoint_error(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return None
    return f"--s3-endpoint {url!r} is not an http:// or https:// URL with a host"


def use_spark(engine: str, master: str | None, usage_bytes: int) -> bool:
    if engine != "auto":
        return engine == "spark"
    return master is not None or usage_bytes > ARROW_MAX_BYTES


def run(args: argparse.Namespace) -> int:
    from zonegate.cost_model.prices import UnknownPrice
    from zonegate.usage.schema import UsageInputError

    try:
        prices = chosen_prices(args)
        prices.object_storage(args.storage_class)
    except UnknownPrice as exc:
        return _fail(str(exc))
    if args.s3_endpoint and (bad := _endpoint_error(args.s3_endpoint)):
        return _fail(bad)
    if args.engine == "arrow" and args.master is not None:
        return _fail("--master is for the Spark engine: drop it or use --engine spark or auto")
    from zonegate.analytics.job import check_out_dir, run_report
    from zonegate.analytics.progress import Progress
    from zonegate.analytics.source import locate

    try:
        check_out_dir(args.out)
        loc = locate(args.usage, args.s3_endpoint)
    except UsageInputError as exc:
        return _fail(str(exc))
    progress = Progress(5)
    spark = None
    if use_spark(args.engine, args.master, loc.total_bytes):
        try:
            from zonegate.analytics.spark_engine import spark_session
        except ModuleNotFoundError as exc:
            return _fail(
                f"the Spark engine needs {exc.name}, which is not installed: "
                "pip install -e '.[report]' in the zonegate clone"
            )
        spark = spark_session(args.master or "local[*]", console_progress=progress.live)
    try:
        result = run_report(loc, args.out, prices, args.storage_class, progress, spark)
    except UsageInputError as exc:
        progress.abandon()
        return _fail(str(exc))
    except Exception as exc:  # Spark wraps worker errors; show ours if it is one
        ours = worker_error(str(exc))
        if ours is None:
            raise
        progress.abandon()
        return _fail(ours)
    finally:
        if spark is not None:
            spark.stop()
    print(s3_purposes_text(result.tables["s3_by_purpose"]))
    print(tenants_text(result.tables["cost_by_principal"]))
    from zonegate.analytics.outage import outage_text

    print(outage_text(result.tables["outage_cross_zone"]))
    print(f"report written to {args.out} (open {args.out / 'dashboard.html'})")
    return 0


def s3_purposes_text(rows: list[dict[str, Any]]) -> str:
    """The S3 request cost by purpose, one line each, most expensive first."""
    if not rows:
        return "S3 requests: none in the records"
    total = sum(r["request_usd"] for r in rows)
    lines = [f"S3 request cost by purpose (USD {total:.6g} in all):"]
    width = max(len(r["purpose"]) for r in rows)
    for r in rows:
        counts = ", ".join(
            f"{r[k]:,} {name}"
            for k, name in (
                ("put_requests", "PUT"),
                ("get_requests", "GET"),
                ("list_requests", "LIST"),
                ("delete_requests", "DeleteObjects"),
                ("other_requests", "other"),
            )
            if r[k]
        )
        lines.append(f"  {r['purpose']:<{width}}  USD {r['request_usd']:.6g}  ({counts})")
    return "\n".join(lines)


def tenants_text(rows: list[dict[str, Any]]) -> str:
    """Cost by principal, one line each, most expensive first (the table's order)."""
    if not rows:
        return "cost by principal: no traffic in the records"
    total = sum(r["total_usd"] for r in rows)
    lines = [f"cost by principal (USD {total:.6g} in all):"]
    width = max(len(r["principal"]) for r in rows)
    for r in rows:
        lines.append(
            f"  {r['principal']:<{width}}  USD {r['total_usd']:.6g}  ({r['bytes']:,} bytes, "
            f"{r['cross_zone_bytes']:,} across zones)"
        )
    return "\n".join(lines)


_OURS = re.compile(r"(?:UnknownSchemaVersion|UsageInputError): (.+)")


def worker_error(text: str) -> str | None:
    """Our own input error raised inside a Spark worker, found in Spark's wrapped message."""
    m = _OURS.search(text)
    return m.group(1).strip() if m else None
