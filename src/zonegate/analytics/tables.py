"""The report's tables from the facts (`facts.FACTS_SCHEMA`): pure, no I/O, no Spark.

Every transfer is counted once, directed (`flows`): client traffic is seen only
by the node (in: client -> node, out: node -> client); a `forward_rpc` is seen
at both ends, so only the sender's `bytes_out` counts. Costs multiply
quantities by `cost_model.usage_rates`, the coefficients `cost_of_usage`
applies to totals. Each table is a list of rows (dicts) with the columns of
`SCHEMAS`, in that order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from zonegate.cost_model.measured import UsageRates, other_requests_usd, s3_request_usd
from zonegate.usage.schema import CLIENT_KINDS

Row = dict[str, Any]

# Traffic with no topic or no client id is about something else; say what.
# (Short enough for the dashboard's chart labels, 26 characters.)
LEADER_RPCS = "(node-to-node leader RPCs)"
NO_TOPIC = "(requests about no topic)"
NO_CLIENT_ID = "(no client.id)"

_I, _F, _S = pa.int64(), pa.float64(), pa.string()
_USD = ("transfer_usd", "s3_put_usd", "s3_get_usd", "s3_storage_usd")
_TRAFFIC = [
    ("bytes", _I),  # every transfer once, in both directions, any zone
    ("produce_bytes", _I),
    ("fetch_bytes", _I),
    ("cross_zone_bytes", _I),
    ("transfer_usd", _F),
]
SCHEMAS = {
    "matrix": pa.schema(
        [
            ("kind", _S),
            ("from_zone", _S),
            ("to_zone", _S),
            ("bytes", _I),
            ("cross_zone", pa.bool_()),
        ]
    ),
    "cost_by_topic": pa.schema([("topic", _S), *_TRAFFIC]),
    "cost_by_client": pa.schema([("client_id", _S), *_TRAFFIC]),
    "cost_by_zone": pa.schema(
        [("zone", _S), ("egress_bytes", _I), ("ingress_bytes", _I)]
        + [(c, _F) for c in (*_USD, "total_usd")]
    ),
    "daily": pa.schema(
        [
            ("day", _S),
            ("produce_bytes", _I),
            ("fetch_bytes", _I),
            ("stored_byte_seconds", _F),
            ("cross_zone_bytes", _I),
            *((c, _F) for c in (*_USD, "total_usd", "kafka_usd", "kafka_fff_usd")),
            # Produce and Fetch bytes that crossed zones client to leader (Kafka's
            # baseline: those a leader-routed Kafka moves across), and those whose
            # zones the records do not both name (priced by the baseline's formula).
            ("leader_cross_produce_bytes", _I),
            ("leader_cross_fetch_bytes", _I),
            ("leader_unknown_produce_bytes", _I),
            ("leader_unknown_fetch_bytes", _I),
        ]
    ),
    "s3_by_purpose": pa.schema(
        [
            ("purpose", _S),
            ("put_requests", _I),
            ("get_requests", _I),
            ("list_requests", _I),
            ("delete_requests", _I),
            ("other_requests", _I),  # schema 1: LIST, DELETE and HEAD not told apart
            ("put_bytes", _I),
            ("get_bytes", _I),
            ("request_usd", _F),
        ]
    ),
}
# What the records name S3 requests of no stated purpose (schema 1 counted no purpose).
NO_PURPOSE = "(no purpose recorded)"


def _col(t: pa.Table, name: str) -> pa.ChunkedArray:
    return t.column(name)


def flows(facts: pa.Table) -> pa.Table:
    """(day, kind, from_zone, to_zone, topic, client_id, principal, bytes, cross_zone), each
    transfer once."""
    kind = _col(facts, "kind")
    client = facts.filter(pc.is_in(kind, pa.array(CLIENT_KINDS)))
    sent = facts.filter(pc.is_in(kind, pa.array([*CLIENT_KINDS, "forward_rpc"])))

    def moves(t: pa.Table, src: str, dst: str, nbytes: str) -> pa.Table:
        return pa.table(
            {
                "day": _col(t, "day"),
                "kind": _col(t, "kind"),
                "from_zone": _col(t, src),
                "to_zone": _col(t, dst),
                "topic": _col(t, "topic"),
                "client_id": _col(t, "client_id"),
                "principal": _col(t, "principal"),
                "bytes": _col(t, nbytes),
            }
        )

    out = pa.concat_tables(
        [
            moves(client, "peer_zone", "node_zone", "bytes_in"),
            moves(sent, "node_zone", "peer_zone", "bytes_out"),
        ]
    )
    out = out.filter(pc.greater(_col(out, "bytes"), 0))
    a, b = _col(out, "from_zone"), _col(out, "to_zone")
    crosses = pc.and_(pc.not_equal(a, b), pc.and_(pc.not_equal(a, ""), pc.not_equal(b, "")))
    return out.append_column("cross_zone", crosses)


def sums_by(t: pa.Table, keys: list[str], cols: Iterable[str]) -> list[Row]:
    """Rows of `t` summed by `keys`, as dicts with the sums under the columns' own names."""
    cols = list(cols)
    if t.num_rows == 0:
        return []
    g = t.group_by(keys, use_threads=False).aggregate([(c, "sum") for c in cols])
    return [{k[:-4] if k.endswith("_sum") else k: v for k, v in r.items()} for r in g.to_pylist()]


def matrix(flows_t: pa.Table) -> list[Row]:
    """Bytes from zone to zone by kind, same-zone cells included (they cost nothing)."""
    rows = sums_by(flows_t, ["kind", "from_zone", "to_zone"], ["bytes"])
    for r in rows:
        r["cross_zone"] = r["from_zone"] != r["to_zone"] and bool(r["from_zone"] and r["to_zone"])
    rows.sort(key=lambda r: (r["kind"], r["from_zone"], r["to_zone"]))
    return [{k: r[k] for k in SCHEMAS["matrix"].names} for r in rows]


def _label(t: pa.Table, key: str, none_label: str) -> pa.ChunkedArray:
    """`key`'s value, or what the traffic without one is: leader RPCs or `none_label`."""
    value = _col(t, key)
    missing = pc.equal(value, "")
    rpc = pc.equal(_col(t, "kind"), "forward_rpc")
    return pc.if_else(missing, pc.if_else(rpc, LEADER_RPCS, none_label), value)


def traffic_by(facts: pa.Table, flows_t: pa.Table, key: str, rates: UsageRates) -> list[Row]:
    """All traffic of each topic (or client id), and what of it crossed zones, at what cost."""
    none_label = NO_TOPIC if key == "topic" else NO_CLIENT_ID
    f = flows_t.append_column("label", _label(flows_t, key, none_label))
    f = f.append_column("cross_bytes", pc.if_else(_col(f, "cross_zone"), _col(f, "bytes"), 0))
    kind = _col(facts, "kind")
    d = facts.append_column("label", _label(facts, key, none_label))
    d = d.append_column(
        "produce", pc.if_else(pc.equal(kind, "produce_data"), _col(d, "bytes_in"), 0)
    ).append_column("fetch", pc.if_else(pc.equal(kind, "fetch_data"), _col(d, "bytes_out"), 0))
    out: dict[str, Row] = defaultdict(
        lambda: {"bytes": 0, "produce_bytes": 0, "fetch_bytes": 0, "cross_zone_bytes": 0}
    )
    for r in sums_by(f, ["label"], ["bytes", "cross_bytes"]):
        out[r["label"]]["bytes"] = r["bytes"]
        out[r["label"]]["cross_zone_bytes"] = r["cross_bytes"]
    for r in sums_by(d, ["label"], ["produce", "fetch"]):
        if r["produce"] or r["fetch"]:
            out[r["label"]]["produce_bytes"] = r["produce"]
            out[r["label"]]["fetch_bytes"] = r["fetch"]
    rows = [
        {key: label, **v, "transfer_usd": v["cross_zone_bytes"] * rates.cross_zone_per_byte}
        for label, v in out.items()
    ]
    rows.sort(key=lambda r: (-r["transfer_usd"], -r["bytes"], r[key]))
    return rows


def s3_usd(r: Row, rates: UsageRates) -> Row:
    return {
        "s3_put_usd": r["s3_put_requests"] * rates.s3_put_per_request
        + other_requests_usd(
            r["s3_other_requests"], r["s3_list_requests"], r["s3_delete_requests"], rates
        )
        + r["s3_put_bytes"] * rates.s3_put_per_byte,
        "s3_get_usd": r["s3_get_requests"] * rates.s3_get_per_request
        + r["s3_get_bytes"] * rates.s3_get_per_byte,
        "s3_storage_usd": r["stored_byte_seconds"] * rates.storage_per_byte_second,
    }


S3_SUMS = (
    "s3_put_requests",
    "s3_get_requests",
    "s3_other_requests",
    "s3_put_bytes",
    "s3_get_bytes",
    "s3_list_requests",
    "s3_delete_requests",
    "stored_byte_seconds",
)


def _total(r: Row) -> Row:
    r["total_usd"] = sum(r[c] for c in _USD)
    return r


def cost_by_zone(facts: pa.Table, flows_t: pa.Table, rates: UsageRates) -> list[Row]:
    """Each zone pays for what it sends out and takes in across zones, and its S3 use."""
    cross = flows_t.filter(_col(flows_t, "cross_zone"))
    egress = {r["from_zone"]: r["bytes"] for r in sums_by(cross, ["from_zone"], ["bytes"])}
    ingress = {r["to_zone"]: r["bytes"] for r in sums_by(cross, ["to_zone"], ["bytes"])}
    rows = []
    for s3 in sorted(sums_by(facts, ["node_zone"], S3_SUMS), key=lambda r: r["node_zone"]):
        zone = s3["node_zone"]
        e, i = egress.get(zone, 0), ingress.get(zone, 0)
        transfer = e * rates.cross_zone_out_per_byte + i * rates.cross_zone_in_per_byte
        row = {"zone": zone, "egress_bytes": e, "ingress_bytes": i, "transfer_usd": transfer}
        rows.append(_total(row | s3_usd(s3, rates)))
    return rows


def daily(facts: pa.Table, flows_t: pa.Table, rates: UsageRates) -> list[Row]:
    """Per UTC day: traffic, storage and zonegate's cost by line item (Kafka's comes later)."""
    kind = _col(facts, "kind")
    d = facts.append_column(
        "produce_bytes", pc.if_else(pc.equal(kind, "produce_data"), _col(facts, "bytes_in"), 0)
    ).append_column(
        "fetch_bytes", pc.if_else(pc.equal(kind, "fetch_data"), _col(facts, "bytes_out"), 0)
    )
    for k in ("produce", "fetch"):
        mine = pc.equal(kind, f"{k}_data")
        for what in ("cross", "unknown"):
            d = d.append_column(
                f"leader_{what}_{k}_bytes", pc.if_else(mine, _col(facts, f"leader_{what}_bytes"), 0)
            )
    leader = [f"leader_{w}_{k}_bytes" for w in ("cross", "unknown") for k in ("produce", "fetch")]
    cross = flows_t.filter(_col(flows_t, "cross_zone"))
    crossed = {r["day"]: r["bytes"] for r in sums_by(cross, ["day"], ["bytes"])}
    rows = []
    for r in sorted(
        sums_by(d, ["day"], ["produce_bytes", "fetch_bytes", *S3_SUMS, *leader]),
        key=lambda r: r["day"],
    ):
        c = crossed.get(r["day"], 0)
        row = {
            "day": r["day"],
            "produce_bytes": r["produce_bytes"],
            "fetch_bytes": r["fetch_bytes"],
            "stored_byte_seconds": r["stored_byte_seconds"],
            "cross_zone_bytes": c,
            "transfer_usd": c * rates.cross_zone_per_byte,
            **{k: r[k] for k in leader},
        }
        rows.append(_total(row | s3_usd(r, rates)))
    return rows


def s3_by_purpose(facts: pa.Table, rates: UsageRates) -> list[Row]:
    """S3 requests by what they were for (WAL, compaction, GC, ...) and what they cost,
    the requests alone (per-GiB upload and retrieval charges are in the S3 line items)."""
    s3 = facts.filter(pc.equal(_col(facts, "kind"), "s3"))
    sums = [
        "s3_put_requests",
        "s3_get_requests",
        "s3_list_requests",
        "s3_delete_requests",
        "s3_other_requests",
        "s3_put_bytes",
        "s3_get_bytes",
    ]
    rows = []
    for r in sums_by(s3, ["s3_purpose"], sums):
        listed, deleted = r["s3_list_requests"], r["s3_delete_requests"]
        rows.append(
            {
                "purpose": r["s3_purpose"] or NO_PURPOSE,
                "put_requests": r["s3_put_requests"],
                "get_requests": r["s3_get_requests"],
                "list_requests": listed,
                "delete_requests": deleted,
                "other_requests": r["s3_other_requests"] - listed - deleted,
                "put_bytes": r["s3_put_bytes"],
                "get_bytes": r["s3_get_bytes"],
                "request_usd": s3_request_usd(
                    r["s3_put_requests"],
                    r["s3_get_requests"],
                    r["s3_other_requests"],
                    listed,
                    deleted,
                    rates,
                ),
            }
        )
    rows.sort(key=lambda r: (-r["request_usd"], r["purpose"]))
    return rows


def zones_seen(facts: pa.Table) -> list[str]:
    zones = pc.unique(
        pa.chunked_array(_col(facts, "node_zone").chunks + _col(facts, "peer_zone").chunks, _S)
    )
    return sorted(z for z in zones.to_pylist() if z)


def schema_versions(facts: pa.Table) -> list[int | None]:
    return list(pc.unique(_col(facts, "schema_version")).to_pylist())


@dataclass(frozen=True)
class ReportTables:
    records: int
    zones: list[str]
    matrix: list[Row]
    cost_by_topic: list[Row]
    cost_by_client: list[Row]
    cost_by_zone: list[Row]
    daily: list[Row]
    s3_by_purpose: list[Row]


def report_tables(facts: pa.Table, rates: UsageRates) -> ReportTables:
    f = flows(facts)
    return ReportTables(
        records=int(pc.sum(_col(facts, "records")).as_py() or 0),
        zones=zones_seen(facts),
        matrix=matrix(f),
        cost_by_topic=traffic_by(facts, f, "topic", rates),
        cost_by_client=traffic_by(facts, f, "client_id", rates),
        cost_by_zone=cost_by_zone(facts, f, rates),
        daily=daily(facts, f, rates),
        s3_by_purpose=s3_by_purpose(facts, rates),
    )
