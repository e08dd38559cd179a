"""Cost by tenant and outage cross-zone bytes, from synthetic records: each principal's own
traffic, its share of what the nodes spend for all, rows that add up to the report's
totals; older records under their stated bucket; an outage's bytes by lost zone and hour."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from zonegate.analytics.facts import facts_of
from zonegate.analytics.outage import outage_cross_zone, outage_text
from zonegate.analytics.synthetic import SyntheticSpec, UsageObject, generate, write_local
from zonegate.analytics.tables import flows, report_tables
from zonegate.analytics.tenants import NO_CLIENT_TRAFFIC, NO_PRINCIPAL, cost_by
from zonegate.cost_model import price_table
from zonegate.cost_model.measured import usage_rates
from zonegate.usage.schema import CLIENT_KINDS, OUTAGE, conform

from .test_money import figures

pytestmark = pytest.mark.unit
AWS = price_table("aws", "us-east-1")
RATES = usage_rates(AWS)
SPEC = SyntheticSpec(topics=2, clients_per_zone=4, days=2, intervals_per_day=2)


def _records(spec: SyntheticSpec = SPEC) -> pa.Table:
    raw = pa.concat_tables([o.table for o in generate(spec)], promote_options="default")
    return conform(raw, "synthetic")


def _two_tenants(records: pa.Table) -> pa.Table:
    """Client rows of even-numbered client ids as User:alice, the others as User:bob."""
    ids = sorted({c for c in records.column("client_id").to_pylist() if c})
    alice = {c for i, c in enumerate(ids) if i % 2 == 0}
    principals = [
        ("User:alice" if c in alice else "User:bob") if k in CLIENT_KINDS else ""
        for k, c in zip(
            records.column("kind").to_pylist(), records.column("client_id").to_pylist(), strict=True
        )
    ]
    i = records.schema.get_field_index("principal")
    return records.set_column(i, "principal", pa.array(principals, pa.string()))


def _total(rows: list[dict[str, object]], col: str) -> float:
    return sum(float(r[col]) for r in rows)  # type: ignore[arg-type]


def test_tenants_rows_add_up_to_the_reports_totals() -> None:
    facts = facts_of(_two_tenants(_records()))
    f = flows(facts)
    t = report_tables(facts, RATES)
    rows = cost_by(facts, f, RATES, ["principal"])
    assert {r["principal"] for r in rows} == {"User:alice", "User:bob"}
    client = f.filter(pc.is_in(f.column("kind"), pa.array(CLIENT_KINDS)))
    assert _total(rows, "bytes") == pc.sum(client.column("bytes")).as_py()
    cross = sum(r["bytes"] for r in t.matrix if r["cross_zone"])
    own = _total(rows, "cross_zone_bytes")
    assert 0 < own < cross  # misrouted clients' own bytes; the rest are leader RPCs
    assert own + _total(rows, "leader_rpc_cross_zone_bytes") == pytest.approx(cross)
    assert _total(rows, "produce_bytes") == sum(r["produce_bytes"] for r in t.daily)
    assert _total(rows, "fetch_bytes") == sum(r["fetch_bytes"] for r in t.daily)
    for col in ("transfer_usd", "s3_put_usd", "s3_get_usd", "s3_storage_usd", "total_usd"):
        daily = _total(t.daily, col)
        mine = (
            _total(rows, "transfer_usd") + _total(rows, "leader_rpc_usd")
            if col == "transfer_usd"
            else _total(rows, col)
        )
        assert mine == pytest.approx(daily, rel=1e-9), col
    s3 = facts.filter(pc.equal(facts.column("kind"), "s3"))
    puts = (
        pc.sum(s3.column("s3_put_requests")).as_py()
        + pc.sum(s3.column("s3_other_requests")).as_py()
    )
    assert _total(rows, "s3_put_requests") == pytest.approx(puts)
    assert _total(rows, "s3_get_requests") == pytest.approx(
        pc.sum(s3.column("s3_get_requests")).as_py()
    )
    # Each tenant's PUT share is its share of the bytes produced, day by day.
    by = {r["principal"]: r for r in rows}
    for r in rows:
        assert r["total_usd"] == pytest.approx(
            sum(r[c] for c in ("transfer_usd", "leader_rpc_usd", "s3_put_usd", "s3_get_usd"))
            + r["s3_storage_usd"]
        )
    assert by["User:alice"]["s3_put_usd"] > 0 and by["User:bob"]["s3_put_usd"] > 0


def test_client_ids_inside_a_principal_add_up_to_it() -> None:
    facts = facts_of(_two_tenants(_records()))
    f = flows(facts)
    principals = {r["principal"]: r for r in cost_by(facts, f, RATES, ["principal"])}
    clients = cost_by(facts, f, RATES, ["principal", "client_id"])
    assert len(clients) > len(principals)
    for name, row in principals.items():
        mine = [c for c in clients if c["principal"] == name]
        for col in ("bytes", "cross_zone_bytes", "produce_bytes", "total_usd", "s3_put_requests"):
            assert _total(mine, col) == pytest.approx(row[col]), (name, col)


def test_records_before_the_principal_count_under_their_own_bucket() -> None:
    facts = facts_of(_records(dataclasses.replace(SPEC, schema_version=2)))
    rows = cost_by(facts, flows(facts), RATES, ["principal"])
    assert [r["principal"] for r in rows] == [NO_PRINCIPAL]
    assert rows[0]["total_usd"] == pytest.approx(
        _total(report_tables(facts, RATES).daily, "total_usd")
    )


def test_a_day_without_client_traffic_puts_its_charges_on_their_own_row() -> None:
    records = _records()
    quiet = records.filter(pc.invert(pc.is_in(records.column("kind"), pa.array(CLIENT_KINDS))))
    facts = facts_of(quiet)
    rows = cost_by(facts, flows(facts), RATES, ["principal", "client_id"])
    assert [(r["principal"], r["client_id"]) for r in rows] == [(NO_CLIENT_TRAFFIC, "")]
    assert rows[0]["bytes"] == 0 and rows[0]["total_usd"] == pytest.approx(
        _total(report_tables(facts, RATES).daily, "total_usd")
    )


def test_outage_bytes_by_lost_zone_and_hour() -> None:
    records = _records()
    node_zone = records.column("node_zone").to_pylist()
    rows = records.to_pylist()
    # Zone c is lost on the second day: its misrouted clients' rows become an outage's.
    day2 = datetime.datetime(2025, 1, 2, tzinfo=datetime.UTC)
    lost = [
        r["kind"] in CLIENT_KINDS
        and r["client_zone"] == "c"
        and r["client_zone"] != z
        and r["interval_start"] >= day2
        for r, z in zip(rows, node_zone, strict=True)
    ]
    assert any(lost)
    reasons = [OUTAGE if x else r["cross_zone_reason"] for r, x in zip(rows, lost, strict=True)]
    i = records.schema.get_field_index("cross_zone_reason")
    facts = facts_of(records.set_column(i, "cross_zone_reason", pa.array(reasons, pa.string())))
    out = outage_cross_zone(facts, RATES)
    assert {(r["zone"], r["window_start"], r["window_end"]) for r in out} == {
        ("c", "2025-01-02 00:00", "2025-01-02 01:00")
    }
    assert {r["served_in_zone"] for r in out} <= {"a", "b"}
    expected = sum(r["bytes_in"] + r["bytes_out"] for r, x in zip(rows, lost, strict=True) if x)
    assert sum(r["bytes"] for r in out) == expected
    assert sum(r["transfer_usd"] for r in out) == pytest.approx(
        expected * RATES.cross_zone_per_byte
    )
    text = outage_text(out)
    assert text.startswith(f"outage cross-zone bytes: {expected:,} ")
    assert "c 2025-01-02 00:00 to 01:00" in text
    assert outage_cross_zone(facts_of(records), RATES) == []
    assert outage_text([]).startswith("outage cross-zone bytes: none")


def _tenant_objects(spec: SyntheticSpec) -> Iterator[UsageObject]:
    """Synthetic objects with two tenants, and zone c lost: its misrouted clients' rows
    are an outage's."""
    for obj in generate(spec):
        t = _two_tenants(conform(obj.table, obj.key))
        lost = pc.and_(
            pc.equal(t.column("cross_zone_reason"), "routed"),
            pc.equal(t.column("client_zone"), "c"),
        )
        reason = pc.if_else(lost, OUTAGE, t.column("cross_zone_reason"))
        i = t.schema.get_field_index("cross_zone_reason")
        yield UsageObject(obj.key, t.set_column(i, "cross_zone_reason", reason))


def test_the_dashboard_and_the_command_show_tenants_and_the_outage(tmp_path: Path) -> None:
    from zonegate.analytics.cli import tenants_text
    from zonegate.analytics.job import run_report
    from zonegate.analytics.progress import Progress
    from zonegate.analytics.source import locate

    root = tmp_path / "store"
    write_local(_tenant_objects(SPEC), root)
    with (tmp_path / "progress.txt").open("w") as f:
        result = run_report(locate(root.as_uri()), tmp_path / "out", AWS, progress=Progress(5, f))
    page = (tmp_path / "out" / "dashboard.html").read_text()
    tenants = page[page.index("<h2>Cost by tenant") : page.index("<h2>Outage cross-zone")]
    assert "User:alice" in tenants and "User:bob" in tenants
    assert "By client id inside each principal" in tenants
    outage = page[page.index("<h2>Outage cross-zone") : page.index("<h2>Prices used")]
    assert "<td" in outage and ">c<" in outage
    # Money on these sections keeps the dashboard's rule: three significant figures.
    text = unescape(re.sub(r"<[^>]+>", " ", tenants + outage))
    amounts = [a.rstrip(".,") for a in re.findall(r"[<>]?-?\$[\d.,]+[kMBT]?", text)]
    odd = [a for a in amounts if a not in ("$0", "<$0.000001") and figures(a) != 3]
    assert amounts and not odd, odd
    rows = result.tables["cost_by_principal"]
    text = tenants_text(rows)
    assert text.splitlines()[0].startswith("cost by principal (USD ")
    assert {line.split()[0] for line in text.splitlines()[1:]} == {"User:alice", "User:bob"}
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert set(report["cost_by_principal_usd"]) == {"User:alice", "User:bob"}
    assert set(report["outage_cross_zone_bytes"]) == {"c"}
    for name in ("cost_by_principal", "cost_by_principal_client", "outage_cross_zone"):
        assert (tmp_path / "out" / "csv" / name / "part-00000.csv").exists()
