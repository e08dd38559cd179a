"""`zonegate cost`: the what-if table of monthly cost by line item for one workload."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from zonegate.cost_model.breakdown import LINE_ITEMS
from zonegate.cost_model.price_tables import default_region, price_table
from zonegate.cost_model.prices import MIB, PriceTable, UnknownPrice
from zonegate.cost_model.whatif import (
    Assumptions,
    Scenario,
    Workload,
    compare,
    s3_request_usd,
    wal_objects_per_second,
)
from zonegate.runtime import units


def _positive_ms(text: str) -> float:
    try:
        value = units.parse_ms(text)
    except units.UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 ms, got {text}")
    return value


def parse_size(text: str) -> int:
    """`8MiB`, `512KiB`, `1048576` -> bytes (runtime/units.py: as every setting takes them)."""
    try:
        return units.parse_size(text)
    except units.UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "cost",
        help="what-if monthly cost of a workload: Kafka vs an S3-WAL broker vs zonegate",
        description=(
            "Monthly cost by line item of one workload under Apache Kafka (RF=3 across the "
            "zones, with and without fetch-from-follower), an S3-WAL broker without zone "
            "routing, and zonegate. Formulas: docs/cost-model.md; prices: docs/prices.md."
        ),
    )
    p.add_argument(
        "--ingress-mib-s",
        metavar="MIB_S",
        type=units.at_least(0, float),
        default=None,
        help="produce throughput in MiB/s (required, unless --tenant is given)",
    )
    p.add_argument(
        "--tenant",
        metavar="NAME=MIB_S[,fanout=N][,zones=N][,retention-hours=H]",
        action="append",
        default=[],
        help="price a tenant mix instead of one workload: a tenant producing MIB_S, read by "
        "fanout groups (default 1) from clients in zones of the cluster's --zones (default "
        "all), keeping its data retention-hours (default --retention-hours); repeat per "
        "tenant. Prints each tenant's cost and the total",
    )
    p.add_argument(
        "--fanout",
        metavar="N",
        type=units.at_least(0, float),
        default=1.0,
        help="consumer groups reading everything produced (default 1)",
    )
    p.add_argument(
        "--zones",
        metavar="N",
        type=units.at_least(1, int),
        default=3,
        help="availability zones the cluster and its clients spread over (default 3)",
    )
    p.add_argument(
        "--retention-hours",
        metavar="HOURS",
        type=units.at_least(0, float),
        default=72.0,
        help="how long data is kept (default 72)",
    )
    p.add_argument(
        "--partitions",
        metavar="N",
        type=units.at_least(1, int),
        default=100,
        help="partitions over all topics; sets how many stream objects compaction writes "
        "(default 100)",
    )
    p.add_argument(
        "--wal-seal-size",
        metavar="SIZE",
        type=parse_size,
        default=8 << 20,
        help="WAL object size at which an S3 broker uploads, e.g. 8MiB (default 8MiB)",
    )
    p.add_argument(
        "--wal-seal-age-ms",
        metavar="MS",
        type=_positive_ms,
        default=250.0,
        help="WAL object age at which an S3 broker uploads at the latest (default 250)",
    )
    p.add_argument(
        "--wal-put-ms",
        metavar="MS",
        type=_positive_ms,
        default=100.0,
        help="one WAL upload cycle (the PUT, plus sealing): with group commit a node "
        "seals an object per cycle while data keeps coming; a node measures it as "
        'zonegate_produce_stage_seconds{stage="put"} (default 100, an assumption for '
        "S3 Standard)",
    )
    p.add_argument(
        "--wal-seal-when-idle",
        choices=("true", "false"),
        default="true",
        help="group commit, as the node's setting of that name: seal as soon as no upload "
        "is in flight; false: only at the seal size or age (default true)",
    )
    p.add_argument(
        "--nodes-per-zone",
        metavar="N",
        type=units.at_least(1, int),
        default=1,
        help="broker nodes in each zone, each writing its own WAL objects (default 1)",
    )
    p.add_argument(
        "--days",
        metavar="DAYS",
        type=units.at_least(1e-9, float),
        default=30.0,
        help="period priced (default 30)",
    )
    add_price_arguments(p)
    p.add_argument(
        "--json", action="store_true", help="print JSON instead of a table (default: a table)"
    )
    p.set_defaults(func=run)


def add_price_arguments(p: argparse.ArgumentParser) -> None:
    """The price table a command prices by: --provider, --region, --storage-class (the
    what-if model's and the report's, read by `chosen_prices`)."""
    p.add_argument("--provider", default="aws", help="price table: aws, gcp or azure (default aws)")
    p.add_argument(
        "--region",
        default=None,
        help="region of the provider's price table (default: the provider's first region, "
        "us-east-1 for aws)",
    )
    p.add_argument(
        "--storage-class",
        choices=("standard", "express"),
        default="standard",
        help="S3 Standard or S3 Express One Zone prices (default standard)",
    )


def chosen_prices(args: argparse.Namespace) -> PriceTable:
    """The price table `add_price_arguments` chose; UnknownPrice for an unknown one."""
    return price_table(args.provider, args.region or default_region(args.provider))


def run(args: argparse.Namespace) -> int:
    if (args.ingress_mib_s is None) == (not args.tenant):
        print(
            "zonegate cost: give either --ingress-mib-s (one workload) or --tenant "
            "(a tenant mix), not both or neither",
            file=sys.stderr,
        )
        return 2
    try:
        prices = chosen_prices(args)
        workload = Workload(
            ingress_mib_s=args.ingress_mib_s or 0.0,
            fanout=args.fanout,
            zones=args.zones,
            retention_hours=args.retention_hours,
            partitions=args.partitions,
            wal_seal_bytes=args.wal_seal_size,
            wal_seal_age_ms=args.wal_seal_age_ms,
            nodes_per_zone=args.nodes_per_zone,
            days=args.days,
        )
        assumptions = Assumptions(
            wal_group_commit=args.wal_seal_when_idle == "true",
            wal_put_s=args.wal_put_ms / 1000,
        )
        if args.tenant:
            return _run_mix(args, workload, prices, assumptions)
        scenarios = compare(workload, prices, assumptions, storage_class=args.storage_class)
    except (UnknownPrice, ValueError) as exc:
        print(f"zonegate cost: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out: dict[str, Any] = {s.name: s.cost.as_dict() for s in scenarios}
        out["zonegate_s3_request_usd_by_purpose"] = s3_request_usd(
            workload, assumptions, prices.object_storage(args.storage_class)
        )
        print(json.dumps(out, indent=2))
    else:
        print(render_table(scenarios, prices, workload, args.storage_class, assumptions))
    return 0


def _run_mix(
    args: argparse.Namespace, workload: Workload, prices: PriceTable, a: Assumptions
) -> int:
    """`--tenant ...`: each tenant's cost and the total (cost_model/tenants.py)."""
    from zonegate.cost_model.tenants import parse_tenant, price_mix, render_mix

    tenants = [parse_tenant(t) for t in args.tenant]
    mix = price_mix(tenants, workload, prices, a, storage_class=args.storage_class)
    if not args.json:
        print(render_mix(mix, prices, args.storage_class))
        return 0
    out: dict[str, Any] = {
        "tenants": {
            c.tenant.name: {**c.zonegate.as_dict(), "kafka_total": c.kafka.total}
            for c in mix.tenants
        },
        "total": {**mix.zonegate.as_dict(), "kafka_total": mix.kafka.total},
    }
    print(json.dumps(out, indent=2))
    return 0


def render_table(
    scenarios: list[Scenario],
    prices: PriceTable,
    w: Workload,
    storage_class: str,
    a: Assumptions | None = None,
) -> str:
    """A plain-text table: line items down, scenarios across, USD over the period."""
    head = [f"USD / {w.days:g} days", *(s.name for s in scenarios)]
    rows = [[label, *(_usd(getattr(s.cost, key)) for s in scenarios)] for key, label in LINE_ITEMS]
    rows.append(["Total", *(_usd(s.cost.total) for s in scenarios)])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join(
            [first, *(c.rjust(wd) for c, wd in zip(cells[1:], widths[1:], strict=True))]
        )

    rule = "  ".join("-" * wd for wd in widths)
    s3 = prices.object_storage(storage_class)
    title = (
        f"{w.ingress_mib_s:g} MiB/s in, fan-out {w.fanout:g}, "
        f"{'one zone (no cross-zone traffic)' if w.zones == 1 else f'{w.zones} zones'}, "
        f"{w.retention_hours:g} h retention, {w.partitions} partitions; "
        f"{prices.provider} {prices.region}, {s3.name}, {prices.block_storage_name}"
    )
    a = a or Assumptions()
    by_purpose = s3_request_usd(w, a, s3)
    per_node = wal_objects_per_second(w, a) / w.nodes
    sealing = (
        f"group commit, {a.wal_put_s * 1000:g} ms upload cycle"
        if a.wal_group_commit
        else "no group commit"
    )
    object_mib = w.ingress_bytes_s / w.nodes / per_node / MIB if per_node else 0.0
    objects = f"{per_node:.3g} objects/s per node of {object_mib:.3g} MiB" if per_node else "none"
    wal_line = f"zonegate's WAL: {objects} ({sealing}; --wal-put-ms, --wal-seal-when-idle)"
    purposes = ", ".join(
        f"{p} {_usd(v)}" for p, v in sorted(by_purpose.items(), key=lambda kv: -kv[1]) if v
    )
    return "\n".join(
        [
            title,
            "",
            line(head),
            rule,
            *map(line, rows[:-1]),
            rule,
            line(rows[-1]),
            "",
            f"zonegate's S3 requests by purpose (USD, requests only): {purposes}",
            wal_line,
        ]
    )


def _usd(x: float) -> str:
    return f"{x:,.2f}"
