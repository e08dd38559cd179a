"""Cost by tenant: the report's traffic, cross-zone bytes, S3 requests and cost by principal
(and by client id inside a principal), built from the facts; pure, no I/O.

What a client's requests moved is the tenant's own, measured: its bytes, the part
that crossed zones and that transfer's cost. What the nodes spend for every tenant
at once is shared out, day by day, in proportion to what each tenant moved:

- S3 PUT-side charges (WAL uploads, compaction, GC, usage records, per-GiB upload)
  and storage by its produced bytes: every byte produced is uploaded, compacted and
  stored;
- S3 GET-side charges by its fetched bytes;
- the nodes' leader RPCs (which name no topic or client) that crossed zones by its
  produced plus fetched bytes: Appends carry produce, ReadIndex and Watch serve fetch.

A day on which no tenant produced (or fetched) shares that side by all client bytes,
and one with no client traffic at all puts it on `NO_CLIENT_TRAFFIC`. So the rows
always sum to the report's totals: bytes crossing zones to the matrix's, cost to
zonegate's measured cost (docs/report.md).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from zonegate.analytics.tables import NO_CLIENT_ID, S3_SUMS, Row, s3_usd, sums_by
from zonegate.cost_model.measured import UsageRates
from zonegate.usage.schema import CLIENT_KINDS

# Client traffic of records written before the principal was (schema 1 and 2).
NO_PRINCIPAL = "(no principal recorded)"
# Shared charges of a day on which no client moved a byte.
NO_CLIENT_TRAFFIC = "(no client traffic)"

_I, _F, _S = pa.int64(), pa.float64(), pa.string()
_COLUMNS = [
    ("bytes", _I),  # the tenant's own client traffic, each transfer once
    ("produce_bytes", _I),
    ("fetch_bytes", _I),
    ("cross_zone_bytes", _I),  # of its own traffic
    ("transfer_usd", _F),
    ("leader_rpc_cross_zone_bytes", _F),  # its share of the leader RPCs that crossed
    ("leader_rpc_usd", _F),
    ("s3_put_requests", _F),  # its share (LIST and DeleteObjects included)
    ("s3_get_requests", _F),
    ("s3_put_usd", _F),
    ("s3_get_usd", _F),
    ("s3_storage_usd", _F),
    ("total_usd", _F),
]
SCHEMAS = {
    "cost_by_principal": pa.schema([("principal", _S), *_COLUMNS]),
    "cost_by_principal_client": pa.schema([("principal", _S), ("client_id", _S), *_COLUMNS]),
}
_ZERO = {name: 0 for name, _ in _COLUMNS}


def _labelled(t: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Client rows of `t` with the empty principal and client id named."""
    t = t.filter(pc.is_in(t.column("kind"), pa.array(CLIENT_KINDS)))
    for key, none in (("principal", NO_PRINCIPAL), ("client_id", NO_CLIENT_ID)):
        if key in keys:
            col = t.column(key)
            t = t.set_column(
                t.schema.get_field_index(key), key, pc.if_else(pc.equal(col, ""), none, col)
            )
    return t


def _share(
    amount: float, weights: dict[tuple[str, ...], float], fallback: dict[tuple[str, ...], float]
) -> dict[tuple[str, ...], float]:
    """`amount` in proportion to `weights`, else `fallback`, else all to NO_CLIENT_TRAFFIC."""
    for w in (weights, fallback):
        total = sum(w.values())
        if total > 0:
            return {k: amount * v / total for k, v in w.items()}
    return {(NO_CLIENT_TRAFFIC,): amount} if amount else {}


def cost_by(
    facts: pa.Table, flows_t: pa.Table, rates: UsageRates, keys: Sequence[str]
) -> list[Row]:
    """One row per value of `keys` (("principal",) or ("principal", "client_id")), its own
    traffic measured and the shared charges shared out (module docstring)."""
    keys = list(keys)
    f = _labelled(flows_t, keys)
    f = f.append_column("cross_bytes", pc.if_else(f.column("cross_zone"), f.column("bytes"), 0))
    d = _labelled(facts, keys)
    kind = d.column("kind")
    d = d.append_column(
        "produce", pc.if_else(pc.equal(kind, "produce_data"), d.column("bytes_in"), 0)
    ).append_column("fetch", pc.if_else(pc.equal(kind, "fetch_data"), d.column("bytes_out"), 0))
    rows: dict[tuple[str, ...], Row] = defaultdict(lambda: dict(_ZERO))
    # Per day: what each key moved (the weights) and what the day's shared charges are.
    moved: dict[str, dict[tuple[str, ...], dict[str, float]]] = defaultdict(dict)
    for r in sums_by(f, ["day", *keys], ["bytes", "cross_bytes"]):
        k = tuple(r[c] for c in keys)
        row = rows[k]
        row["bytes"] += r["bytes"]
        row["cross_zone_bytes"] += r["cross_bytes"]
        moved[r["day"]].setdefault(k, {"bytes": 0, "produce": 0, "fetch": 0})["bytes"] += r["bytes"]
    for r in sums_by(d, ["day", *keys], ["produce", "fetch"]):
        k = tuple(r[c] for c in keys)
        rows[k]["produce_bytes"] += r["produce"]
        rows[k]["fetch_bytes"] += r["fetch"]
        mine = moved[r["day"]].setdefault(k, {"bytes": 0, "produce": 0, "fetch": 0})
        mine["produce"] += r["produce"]
        mine["fetch"] += r["fetch"]
    rpc = flows_t.filter(
        pc.and_(pc.equal(flows_t.column("kind"), "forward_rpc"), flows_t.column("cross_zone"))
    )
    rpc_cross = {r["day"]: r["bytes"] for r in sums_by(rpc, ["day"], ["bytes"])}
    for day_sums in sums_by(facts, ["day"], S3_SUMS):
        day = day_sums["day"]
        usd = s3_usd(day_sums, rates)
        m = moved.get(day, {})
        by_bytes = {k: float(v["bytes"]) for k, v in m.items()}
        produced = {k: float(v["produce"]) for k, v in m.items()}
        fetched = {k: float(v["fetch"]) for k, v in m.items()}
        data = {k: produced[k] + fetched[k] for k in m}
        puts = day_sums["s3_put_requests"] + day_sums["s3_other_requests"]
        for column, amount, weights in (
            ("s3_put_requests", puts, produced),
            ("s3_put_usd", usd["s3_put_usd"], produced),
            ("s3_storage_usd", usd["s3_storage_usd"], produced),
            ("s3_get_requests", day_sums["s3_get_requests"], fetched),
            ("s3_get_usd", usd["s3_get_usd"], fetched),
            ("leader_rpc_cross_zone_bytes", rpc_cross.get(day, 0), data),
        ):
            for k, part in _share(float(amount), weights, by_bytes).items():
                if k == (NO_CLIENT_TRAFFIC,):
                    k = (NO_CLIENT_TRAFFIC, *[""] * (len(keys) - 1))
                rows[k][column] += part
    out = []
    for k, r in rows.items():
        r["transfer_usd"] = r["cross_zone_bytes"] * rates.cross_zone_per_byte
        r["leader_rpc_usd"] = r["leader_rpc_cross_zone_bytes"] * rates.cross_zone_per_byte
        r["total_usd"] = sum(
            r[c]
            for c in (
                "transfer_usd",
                "leader_rpc_usd",
                "s3_put_usd",
                "s3_get_usd",
                "s3_storage_usd",
            )
        )
        out.append({**dict(zip(keys, k, strict=True)), **r})
    out.sort(key=lambda r: (-r["total_usd"], -r["bytes"], *(r[c] for c in keys)))
    return out
