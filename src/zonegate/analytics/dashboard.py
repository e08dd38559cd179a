"""The static HTML dashboard: one self-contained file from the report's (small) tables.

Pure: collected rows in, HTML text out. Charts are inline SVG (`charts`), the
only script sorts tables, and nothing is fetched from the network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from importlib import resources
from string import Template
from typing import Any

from zonegate.analytics import charts
from zonegate.cost_model.prices import PriceTable

Row = Mapping[str, Any]


@dataclass(frozen=True)
class DashboardData:
    usage_url: str
    generated_at: str
    prices: PriceTable
    storage_class: str
    records: int
    objects: int
    zones: Sequence[str]
    matrix: Sequence[Row]
    by_topic: Sequence[Row]
    by_client: Sequence[Row]
    by_zone: Sequence[Row]
    daily: Sequence[Row]
    savings: Sequence[Row]


def _table(
    rows: Sequence[Row], cols: Sequence[tuple[str, str, Callable[[Any], str] | None]]
) -> str:
    head = "".join(f"<th>{escape(label)}</th>" for _, label, _ in cols)
    # Money columns get one number of decimals each, so amounts compare down the column.
    cols = [
        (key, label, charts.usd_column([float(r.get(key) or 0) for r in rows]))
        if fmt is charts.usd
        else (key, label, fmt)
        for key, label, fmt in cols
    ]
    body = []
    for r in rows:
        cells = []
        for key, _, fmt in cols:
            v = r.get(key)
            if fmt is None:
                cells.append(f"<td>{escape(str(v))}</td>")
            else:
                cells.append(f'<td data-v="{float(v or 0)!r}">{escape(fmt(v or 0))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    rows_html = "".join(body)
    return (
        f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table>'
    )


def _pct(x: float) -> str:
    return f"{x:.1f}%"


def _price(x: float) -> str:
    """A unit price as the provider states it (`$0.0004`), never in scientific notation."""
    text = f"{x:.6f}".rstrip("0")
    return f"${text}0" if text.endswith(".") or len(text.split(".")[1]) < 2 else f"${text}"


# Below this baseline cost for the whole period, fixed per-request charges decide the
# comparison and savings say nothing about what the same cluster would save at scale.
MEANINGFUL_BASELINE_USD = 1.0


def _savings_notes(d: DashboardData, small: bool) -> tuple[str, str]:
    """The baseline statement (always) and, for small traffic, why savings mean little."""
    zones = len(d.zones)
    p = d.prices
    baseline = (
        f"Savings are measured against a baseline: Apache Kafka with three replicas of every "
        f"partition spread over the {zones} zones in these records, moving the same produced "
        f"and fetched bytes and keeping the same stored bytes, at {p.provider} {p.region} "
        f"prices. Its producers reach a leader in another zone {zones - 1}/{zones} of the "
        "time, two follower copies cross zones, consumers cross zones unless fetching from a "
        f"follower (the second baseline), and three copies sit on {p.block_storage_name} "
        "filled to the brim, a lower bound for Kafka. zonegate's cost is what the records "
        "show it used. See docs/report.md and docs/cost-model.md."
    )
    if not small:
        return baseline, ""
    produced = sum(float(r["produce_bytes"] or 0) for r in d.daily)
    fetched = sum(float(r["fetch_bytes"] or 0) for r in d.daily)
    too_small = (
        f"Too little traffic for the savings to mean anything: these records hold "
        f"{charts.size(produced)} produced and {charts.size(fetched)} fetched, and the Kafka "
        f"baseline comes to {charts.usd(d.savings[1]['total_usd'])} for the whole period. At "
        "that scale zonegate's cost is mostly S3 requests, charged per WAL object however few "
        "bytes it holds (one PUT per seal, every few milliseconds while producing), while "
        "Kafka's cost grows with the bytes moved; so the percentages are left out. For a "
        "steady workload, price one with `zonegate cost --ingress-mib-s 10` (docs/cost-model.md)."
    )
    return baseline, too_small


def _kpis(d: DashboardData, small: bool) -> str:
    zg, kafka, fff = d.savings[0], d.savings[1], d.savings[2]
    cross_bytes = sum(float(r["bytes"]) for r in d.matrix if r["cross_zone"])
    all_bytes = sum(float(r["bytes"]) for r in d.matrix)

    def saved(row: Row) -> str:
        amount = charts.usd(row["zonegate_saves_usd"])
        return amount if small else f"{amount} ({row['zonegate_saves_pct']:.0f}%)"

    return "".join(
        f'<div class="kpi{" good" if good else ""}">{escape(label)}<b>{escape(value)}</b></div>'
        for label, value, good in (
            ("zonegate cost (measured)", charts.usd(zg["total_usd"]), False),
            ("baseline: Kafka, 3 replicas", charts.usd(kafka["total_usd"]), False),
            ("zonegate saves vs the baseline", saved(kafka), not small),
            ("vs Kafka + fetch-from-follower", saved(fff), not small),
            (
                "bytes crossing zones",
                f"{charts.size(cross_bytes)} of {charts.size(all_bytes)}",
                False,
            ),
        )
    )


def _traffic_table(rows: Sequence[Row], key: str, label: str) -> str:
    return _table(
        rows,
        [
            (key, label, None),
            ("bytes", "Traffic", charts.size),
            ("produce_bytes", "Produced", charts.size),
            ("fetch_bytes", "Fetched", charts.size),
            ("cross_zone_bytes", "Cross-zone", charts.size),
            ("transfer_usd", "Transfer cost", charts.usd),
        ],
    )


def render(d: DashboardData) -> str:
    days = [str(r["day"]) for r in d.daily]
    period = f"{days[0]} to {days[-1]}" if days else "no days"
    small = float(d.savings[1]["total_usd"]) < MEANINGFUL_BASELINE_USD
    baseline_note, small_note = _savings_notes(d, small)
    items = ("cross_zone_transfer", "s3_put", "s3_get", "s3_storage", "block_storage")
    legend = ("Cross-zone transfer", "S3 PUT", "S3 GET", "S3 storage", "Block storage")
    savings_chart = charts.stacked_hbars(
        [(str(r["scenario"]), [float(r[f"{k}_usd"]) for k in items]) for r in d.savings],
        legend,
        charts.usd,
    )
    usd_cols = [(f"{k}_usd", lab, charts.usd) for k, lab in zip(items, legend, strict=True)]
    savings_table = _table(
        d.savings,
        [
            ("scenario", "Scenario", None),
            *usd_cols,
            ("total_usd", "Total", charts.usd),
            ("zonegate_saves_usd", "zonegate saves", charts.usd),
            ("zonegate_saves_pct", "saves %", (lambda _: "n/a") if small else _pct),
        ],
    )
    cells: dict[tuple[str, str], float] = {}
    for r in d.matrix:
        key = (str(r["from_zone"]), str(r["to_zone"]))
        cells[key] = cells.get(key, 0.0) + float(r["bytes"])
    matrix_zones = sorted({z for pair in cells for z in pair if z}) or list(d.zones)
    daily_chart = charts.lines(
        days,
        [
            ("zonegate", [float(r["total_usd"]) for r in d.daily]),
            ("Kafka RF=3", [float(r["kafka_usd"]) for r in d.daily]),
            ("Kafka RF=3 + FFF", [float(r["kafka_fff_usd"]) for r in d.daily]),
        ],
        charts.usd,
    )
    zone_cost_cols = ("transfer_usd", "s3_put_usd", "s3_get_usd", "s3_storage_usd")
    p = d.prices
    s3 = p.object_storage(d.storage_class)
    prices_html = _table(
        [
            {
                "what": "Cross-zone transfer out / in per GiB",
                "price": f"{_price(p.cross_zone_out_per_gib)} / {_price(p.cross_zone_in_per_gib)}",
                "source": p.cross_zone_source.url,
                "stated": p.cross_zone_source.stated,
            },
            {
                "what": f"{s3.name} PUT / GET per 1,000",
                "price": f"{_price(s3.put_per_1000)} / {_price(s3.get_per_1000)}",
                "source": s3.source.url,
                "stated": s3.source.stated,
            },
            {
                "what": f"{s3.name} storage per GiB-month",
                "price": _price(s3.storage_per_gib_month),
                "source": s3.source.url,
                "stated": s3.source.stated,
            },
            {
                "what": f"{p.block_storage_name} per GiB-month (Kafka's disks)",
                "price": _price(p.block_storage_per_gib_month),
                "source": p.block_storage_source.url,
                "stated": p.block_storage_source.stated,
            },
        ],
        [
            ("what", "Price", None),
            ("price", "USD", None),
            ("source", "Source", None),
            ("stated", "Stated", None),
        ],
    )
    top = 15
    fields = {
        "period": escape(period),
        "subtitle": escape(
            f"{d.usage_url} · {period} · {d.records:,} usage records in {d.objects:,} objects · "
            f"{p.provider} {p.region}, {s3.name} · zones {', '.join(d.zones)} · "
            f"generated {d.generated_at}"
        ),
        "kpis": _kpis(d, small),
        "savings_note": escape(baseline_note),
        "small_note": (f'<p class="warn">{escape(small_note)}</p>' if small_note else ""),
        "savings_chart": savings_chart,
        "savings_table": savings_table,
        "matrix_chart": charts.heatmap(matrix_zones, cells, charts.size),
        "matrix_table": _table(
            d.matrix,
            [
                ("kind", "Kind", None),
                ("from_zone", "From", None),
                ("to_zone", "To", None),
                ("bytes", "Bytes", charts.size),
            ],
        ),
        "daily_chart": daily_chart,
        "daily_table": _table(
            d.daily,
            [
                ("day", "Day", None),
                ("cross_zone_bytes", "Cross-zone", charts.size),
                ("produce_bytes", "Produced", charts.size),
                ("transfer_usd", "Transfer", charts.usd),
                ("s3_put_usd", "S3 PUT", charts.usd),
                ("s3_get_usd", "S3 GET", charts.usd),
                ("s3_storage_usd", "S3 storage", charts.usd),
                ("total_usd", "zonegate", charts.usd),
                ("kafka_usd", "Kafka", charts.usd),
                ("kafka_fff_usd", "Kafka + FFF", charts.usd),
            ],
        ),
        "topic_chart": charts.hbars(
            [(str(r["topic"]), float(r["bytes"])) for r in d.by_topic[:top]], charts.size
        ),
        "topic_table": _traffic_table(d.by_topic[:top], "topic", "Topic"),
        "client_chart": charts.hbars(
            [(str(r["client_id"]), float(r["bytes"])) for r in d.by_client[:top]], charts.size
        ),
        "client_table": _traffic_table(d.by_client[:top], "client_id", "Client id"),
        "zone_chart": charts.stacked_hbars(
            [(str(r["zone"]), [float(r[c]) for c in zone_cost_cols]) for r in d.by_zone],
            ("Cross-zone transfer", "S3 PUT", "S3 GET", "S3 storage"),
            charts.usd,
        ),
        "zone_table": _table(
            d.by_zone,
            [
                ("zone", "Zone", None),
                ("egress_bytes", "Sent across", charts.size),
                ("ingress_bytes", "Received across", charts.size),
                *[
                    (c, label, charts.usd)
                    for c, label in zip(
                        zone_cost_cols,
                        ("Transfer", "S3 PUT", "S3 GET", "S3 storage"),
                        strict=True,
                    )
                ],
                ("total_usd", "Total", charts.usd),
            ],
        ),
        "prices": prices_html,
    }
    template = resources.files("zonegate.analytics").joinpath("dashboard.html").read_text("utf-8")
    return Template(template).substitute(fields)
