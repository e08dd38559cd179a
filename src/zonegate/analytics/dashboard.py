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
from zonegate.analytics.money import usd
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
    by_principal: Sequence[Row] = ()
    by_principal_client: Sequence[Row] = ()
    outage: Sequence[Row] = ()


def _table(
    rows: Sequence[Row], cols: Sequence[tuple[str, str, Callable[[Any], str] | None]]
) -> str:
    head = "".join(f"<th>{escape(label)}</th>" for _, label, _ in cols)
    body = []
    for r in rows:
        cells = []
        for i, (key, _, fmt) in enumerate(cols):
            v = r.get(key)
            if fmt is None:
                text = escape(str(v))
                # The first column names the row: one line, cut with an ellipsis if it
                # must be, the whole name on hover (and in the page's text).
                attrs = f' class="name" title="{text}"' if i == 0 else ""
                cells.append(f"<td{attrs}>{text}</td>")
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


# The "too little traffic" banner: shown exactly when both of its statements hold.
# The Kafka baseline for the whole period is under this many dollars (amounts too
# small to compare) ...
MEANINGFUL_BASELINE_USD = 1.0
# ... and S3 requests, charged per object however few bytes it holds, are more than
# this share of zonegate's measured cost (so its cost does not grow with bytes as
# Kafka's does, and a percentage says nothing about the same cluster at scale).
REQUEST_SHARE = 0.5


def request_usd(row: Row) -> float:
    """S3 request charges of a savings row: every `s3_*_usd` line item but storage."""
    return sum(
        float(v or 0)
        for k, v in row.items()
        if k.startswith("s3_") and k.endswith("_usd") and k != "s3_storage_usd"
    )


def too_little_traffic(savings: Sequence[Row]) -> bool:
    """The banner's rule (docs/report.md): the baseline is under MEANINGFUL_BASELINE_USD
    and S3 requests are more than REQUEST_SHARE of zonegate's measured cost."""
    zg, kafka = savings[0], savings[1]
    zg_total = float(zg["total_usd"] or 0)
    return (
        float(kafka["total_usd"] or 0) < MEANINGFUL_BASELINE_USD
        and zg_total > 0
        and request_usd(zg) > REQUEST_SHARE * zg_total
    )


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
    zg = d.savings[0]
    too_small = (
        f"Too little traffic for the savings to mean anything: these records hold "
        f"{charts.size(produced)} produced and {charts.size(fetched)} fetched, the Kafka "
        f"baseline comes to {usd(d.savings[1]['total_usd'])} for the whole period (under "
        f"{usd(MEANINGFUL_BASELINE_USD)}), and S3 requests are most of zonegate's cost "
        f"({usd(request_usd(zg))} of {usd(zg['total_usd'])}), "
        "charged per WAL object however few bytes it holds (one PUT per seal, every few "
        "milliseconds while producing), while Kafka's cost grows with the bytes moved; so "
        "the percentages are left out. For a steady workload, price one with "
        "`zonegate cost --ingress-mib-s 10` (docs/cost-model.md)."
    )
    return baseline, too_small


def _kpis(d: DashboardData, small: bool) -> str:
    zg, kafka, fff = d.savings[0], d.savings[1], d.savings[2]
    cross_bytes = sum(float(r["bytes"]) for r in d.matrix if r["cross_zone"])
    all_bytes = sum(float(r["bytes"]) for r in d.matrix)

    def saved(row: Row) -> str:
        amount = usd(row["zonegate_saves_usd"])
        return amount if small else f"{amount} ({_pct(row['zonegate_saves_pct'])})"

    return "".join(
        f'<div class="kpi{" good" if good else ""}">{escape(label)}<b>{escape(value)}</b></div>'
        for label, value, good in (
            ("zonegate cost (measured)", usd(zg["total_usd"]), False),
            ("baseline: Kafka, 3 replicas", usd(kafka["total_usd"]), False),
            ("zonegate saves vs the baseline", saved(kafka), not small),
            ("vs Kafka + fetch-from-follower", saved(fff), not small),
            (
                "bytes crossing zones",
                f"{charts.size(cross_bytes)} of {charts.size(all_bytes)}",
                False,
            ),
        )
    )


TOP = 15  # rows of the topic and client tables and charts; all of them are in the CSV


def _traffic(rows: Sequence[Row], key: str, label: str, noun: str, table: str) -> str:
    """The chart and table of the TOP rows, and what the rows left out carry."""
    top = rows[:TOP]
    chart = charts.traffic_bars(
        [(str(r[key]), float(r["bytes"]), float(r["cross_zone_bytes"])) for r in top],
        charts.size,
    )
    table_html = _table(
        top,
        [
            (key, label, None),
            ("bytes", "Traffic", charts.size),
            ("produce_bytes", "Produced", charts.size),
            ("fetch_bytes", "Fetched", charts.size),
            ("cross_zone_bytes", "Cross-zone", charts.size),
            ("transfer_usd", "Transfer cost", usd),
        ],
    )
    rest = rows[TOP:]
    if rest:
        moved = sum(float(r["bytes"]) for r in rest)
        cost = sum(float(r["transfer_usd"]) for r in rest)
        table_html += (
            f'<p class="note rest">The {TOP} of {len(rows):,} {noun} with the highest '
            f"cross-zone cost; the other {len(rest):,} carry {charts.size(moved)} of traffic "
            f"and {usd(cost)} of transfer. All of them: <code>csv/{table}/</code>.</p>"
        )
    # The chart beside its table on a wide screen, above it on a narrow one.
    return f'<div class="split"><div>{chart}</div><div>{table_html}</div></div>'


_TENANT_COLS: list[tuple[str, str, Callable[[Any], str] | None]] = [
    ("bytes", "Traffic", charts.size),
    ("produce_bytes", "Produced", charts.size),
    ("fetch_bytes", "Fetched", charts.size),
    ("cross_zone_bytes", "Cross-zone", charts.size),
    ("transfer_usd", "Transfer", usd),
    ("leader_rpc_usd", "Leader RPCs (share)", usd),
    ("s3_put_requests", "S3 PUTs (share)", lambda x: f"{x:,.0f}"),
    ("s3_get_requests", "S3 GETs (share)", lambda x: f"{x:,.0f}"),
    ("s3_put_usd", "S3 PUT", usd),
    ("s3_get_usd", "S3 GET", usd),
    ("s3_storage_usd", "S3 storage", usd),
    ("total_usd", "Total", usd),
]


def _tenants(d: DashboardData) -> str:
    """Cost by principal, then the TOP client ids inside principals by cost."""
    by_principal = _table(d.by_principal, [("principal", "Principal", None), *_TENANT_COLS])
    top = d.by_principal_client[:TOP]
    clients = _table(
        top, [("principal", "Principal", None), ("client_id", "Client id", None), *_TENANT_COLS]
    )
    rest = len(d.by_principal_client) - len(top)
    more = (
        f'<p class="note rest">The {TOP} costliest of {len(d.by_principal_client):,}; all of '
        "them: <code>csv/cost_by_principal_client/</code>.</p>"
        if rest > 0
        else ""
    )
    return f"{by_principal}<h3>By client id inside each principal</h3>{clients}{more}"


def _outage(d: DashboardData) -> str:
    if not d.outage:
        return (
            '<p class="note">None: no client of a lost zone was served by another zone\'s nodes '
            "in these records.</p>"
        )
    return _table(
        d.outage,
        [
            ("zone", "Lost zone", None),
            ("window_start", "From (UTC)", None),
            ("window_end", "To (UTC)", None),
            ("served_in_zone", "Served in", None),
            ("bytes", "Cross-zone", charts.size),
            ("produce_bytes", "Produced", charts.size),
            ("fetch_bytes", "Fetched", charts.size),
            ("transfer_usd", "Transfer", usd),
        ],
    )


def render(d: DashboardData) -> str:
    days = [str(r["day"]) for r in d.daily]
    period = f"{days[0]} to {days[-1]}" if days else "no days"
    small = too_little_traffic(d.savings)
    baseline_note, small_note = _savings_notes(d, small)
    items = ("cross_zone_transfer", "s3_put", "s3_get", "s3_storage", "block_storage")
    names = ("Cross-zone transfer", "S3 PUT", "S3 GET", "S3 storage", "Block storage")
    # Each line item in the colour of what it pays for (charts.COLOURS).
    meanings = ("cross_zone", "s3_put", "s3_get", "s3_storage", "block_storage")
    savings_chart = charts.stacked_hbars(
        [(str(r["scenario"]), [float(r[f"{k}_usd"]) for k in items]) for r in d.savings],
        list(zip(meanings, names, strict=True)),
        usd,
    )
    usd_cols = [(f"{k}_usd", lab, usd) for k, lab in zip(items, names, strict=True)]
    savings_table = _table(
        d.savings,
        [
            ("scenario", "Scenario", None),
            *usd_cols,
            ("total_usd", "Total", usd),
            ("zonegate_saves_usd", "zonegate saves", usd),
            ("zonegate_saves_pct", "saves %", (lambda _: "n/a") if small else _pct),
        ],
    )
    cells: dict[tuple[str, str], float] = {}
    for r in d.matrix:
        key = (str(r["from_zone"]), str(r["to_zone"]))
        cells[key] = cells.get(key, 0.0) + float(r["bytes"])
    matrix_zones = sorted({z for pair in cells for z in pair if z}) or list(d.zones)
    daily_chart = charts.daily(
        days,
        [
            ("zonegate", "zonegate", [float(r["total_usd"]) for r in d.daily]),
            ("kafka", "Kafka RF=3", [float(r["kafka_usd"]) for r in d.daily]),
            ("kafka_fff", "Kafka RF=3 + FFF", [float(r["kafka_fff_usd"]) for r in d.daily]),
        ],
        usd,
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
                ("transfer_usd", "Transfer", usd),
                ("s3_put_usd", "S3 PUT", usd),
                ("s3_get_usd", "S3 GET", usd),
                ("s3_storage_usd", "S3 storage", usd),
                ("total_usd", "zonegate", usd),
                ("kafka_usd", "Kafka", usd),
                ("kafka_fff_usd", "Kafka + FFF", usd),
            ],
        ),
        "topic_traffic": _traffic(d.by_topic, "topic", "Topic", "topics", "cost_by_topic"),
        "client_traffic": _traffic(
            d.by_client, "client_id", "Client id", "client ids", "cost_by_client"
        ),
        "zone_chart": charts.stacked_hbars(
            [(str(r["zone"]), [float(r[c]) for c in zone_cost_cols]) for r in d.by_zone],
            list(zip(meanings[:4], names[:4], strict=True)),
            usd,
        ),
        "zone_table": _table(
            d.by_zone,
            [
                ("zone", "Zone", None),
                ("egress_bytes", "Sent across", charts.size),
                ("ingress_bytes", "Received across", charts.size),
                *[
                    (c, label, usd)
                    for c, label in zip(
                        zone_cost_cols,
                        ("Transfer", "S3 PUT", "S3 GET", "S3 storage"),
                        strict=True,
                    )
                ],
                ("total_usd", "Total", usd),
            ],
        ),
        "prices": prices_html,
        "tenants": _tenants(d),
        "outage": _outage(d),
    }
    template = resources.files("zonegate.analytics").joinpath("dashboard.html").read_text("utf-8")
    return Template(template).substitute(fields)
