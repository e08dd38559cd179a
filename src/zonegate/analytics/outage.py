"""Outage cross-zone bytes: what a lost zone's clients cost while another zone served them.

A node answering a client of another zone records why (usage schema 4,
`cross_zone_reason`): `outage` when the client's zone had nodes but none live. The
facts keep those rows' UTC hour (`outage_window`); this table sums them by hour, lost
zone and the zone that served them, priced at the cross-zone rate, so the cost of
an outage is its own line rather than part of the ordinary traffic. Pure, no I/O.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pyarrow.compute as pc

from zonegate.analytics.tables import Row, sums_by
from zonegate.cost_model.measured import UsageRates
from zonegate.usage.schema import CLIENT_KINDS

_I, _F, _S = pa.int64(), pa.float64(), pa.string()
SCHEMA = pa.schema(
    [
        ("window_start", _S),  # UTC, "YYYY-MM-DD HH:00"
        ("window_end", _S),
        ("zone", _S),  # the lost zone: the clients'
        ("served_in_zone", _S),  # the zone of the nodes that served them
        ("bytes", _I),  # both ways, all across zones
        ("produce_bytes", _I),
        ("fetch_bytes", _I),
        ("transfer_usd", _F),
    ]
)


def _hour_after(window: str) -> str:
    start = datetime.datetime.strptime(window, "%Y-%m-%d %H:%M")
    return (start + datetime.timedelta(hours=1)).strftime("%Y-%m-%d %H:%M")


def outage_cross_zone(facts: pa.Table, rates: UsageRates) -> list[Row]:
    """One row per (UTC hour, lost zone, serving zone) with outage bytes, in time order."""
    t = facts.filter(
        pc.and_(
            pc.not_equal(facts.column("outage_window"), ""),
            pc.is_in(facts.column("kind"), pa.array(CLIENT_KINDS)),
        )
    )
    kind = t.column("kind")
    t = (
        t.append_column("both", pc.add(t.column("bytes_in"), t.column("bytes_out")))
        .append_column(
            "produce", pc.if_else(pc.equal(kind, "produce_data"), t.column("bytes_in"), 0)
        )
        .append_column("fetch", pc.if_else(pc.equal(kind, "fetch_data"), t.column("bytes_out"), 0))
    )
    rows = []
    for r in sums_by(t, ["outage_window", "peer_zone", "node_zone"], ["both", "produce", "fetch"]):
        rows.append(
            {
                "window_start": r["outage_window"],
                "window_end": _hour_after(r["outage_window"]),
                "zone": r["peer_zone"],
                "served_in_zone": r["node_zone"],
                "bytes": r["both"],
                "produce_bytes": r["produce"],
                "fetch_bytes": r["fetch"],
                "transfer_usd": r["both"] * rates.cross_zone_per_byte,
            }
        )
    rows.sort(key=lambda r: (r["window_start"], r["zone"], r["served_in_zone"]))
    return rows


def outage_text(rows: list[Row]) -> str:
    """`zonegate report`'s lines: outage cross-zone bytes per lost zone and hour."""
    if not rows:
        return "outage cross-zone bytes: none (no client was served outside a lost zone)"
    total = sum(r["bytes"] for r in rows)
    usd = sum(r["transfer_usd"] for r in rows)
    lines = [f"outage cross-zone bytes: {total:,} (USD {usd:.6g}), by lost zone and UTC hour:"]
    for r in rows:
        lines.append(
            f"  {r['zone']} {r['window_start']} to {r['window_end'][-5:]}: {r['bytes']:,} bytes "
            f"served in {r['served_in_zone']} (USD {r['transfer_usd']:.6g})"
        )
    return "\n".join(lines)
