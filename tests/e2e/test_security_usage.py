"""The principal in the usage records (issue 25, schema 3) and cost by tenant (issue 26):
two SASL users and an anonymous PLAINTEXT client each produce and consume through
confluent-kafka, and every Produce and Fetch record of their topics names who sent it,
`User:alice`, `User:admin`, `User:ANONYMOUS`; alice also produces from a client of
another zone, so some of her bytes cross zones. The report over the records shows each
tenant's bytes, cross-zone bytes and cost, and they sum to the report's totals."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.security.certs import TestPki
from tests.security.client_configs import Login, confluent
from tests.security.roundtrip import VALUES, roundtrip
from tests.security.secure_node import PLAIN_USERS, SecureNode, security_properties
from zonegate.analytics.progress import Progress

pytestmark = pytest.mark.e2e

LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT")


def _records(root: Path) -> pa.Table:
    files = sorted(p for p in root.rglob("*.parquet") if "usage" in p.parts)
    return pa.concat_tables([pq.read_table(p) for p in files]) if files else pa.table({})


def test_every_produce_and_fetch_record_names_its_principal(tmp_path: Path) -> None:
    pki = TestPki(tmp_path / "pki")
    node = SecureNode(tmp_path / "node", LISTENERS, args=("--usage-interval-s", "1"))
    props = security_properties(pki, node.ports, None)
    props["sasl.enabled.mechanisms"] = "PLAIN"
    for key in [k for k in props if "scram" in k]:
        del props[key]
    # Each round trip's group has one member: no 3 s wait for more before its assignment.
    props["group.initial.rebalance.delay.ms"] = "0"
    node.write_config(props)
    sasl = Login(node.bootstrap_of("SASL_PLAINTEXT"), "SASL_PLAINTEXT", mechanism="PLAIN")
    logins = {
        "User:alice": sasl.but(username="alice", password=PLAIN_USERS["alice"]),
        "User:admin": sasl.but(username="admin", password=PLAIN_USERS["admin"]),
        "User:ANONYMOUS": Login(node.bootstrap_of("PLAINTEXT"), "PLAINTEXT"),
    }
    topics = {p: "usage-" + p.split(":")[1].lower() for p in logins}
    node.start()
    try:
        for principal, login in logins.items():
            got = roundtrip("confluent-kafka", login, topics[principal], topics[principal] + "-g")
            assert got == sorted(VALUES)
        _produce_from_zone_b(logins["User:alice"], topics["User:alice"])
        deadline = time.monotonic() + 30
        seen: dict[tuple[str, str], set[str]] = {}
        while time.monotonic() < deadline:
            rows = _records(node.data_dir).to_pylist()
            seen = {}
            for r in rows:
                if r["kind"] in ("produce_data", "fetch_data") and r["topic"] in topics.values():
                    seen.setdefault((r["topic"], r["kind"]), set()).add(r["principal"])
            if len(seen) == 2 * len(topics):
                break
            time.sleep(0.5)
    finally:
        node.stop()
    for principal, topic in topics.items():
        for kind in ("produce_data", "fetch_data"):
            assert seen.get((topic, kind)) == {principal}, (topic, kind, seen)
    rows = _records(node.data_dir).to_pylist()
    assert {r["schema_version"] for r in rows} == {4}
    assert {r["principal"] for r in rows if r["kind"] in ("s3", "storage", "forward_rpc")} <= {""}
    # The report's facts keep the principal apart.
    from zonegate.analytics.facts import facts_of
    from zonegate.usage.schema import conform

    facts = facts_of(conform(_records(node.data_dir), "the node's records")).to_pylist()
    by_topic = {(f["topic"], f["principal"]) for f in facts if f["kind"] == "produce_data"}
    assert {(t, p) for p, t in topics.items()} <= by_topic
    _report_by_tenant(node.data_dir, tmp_path / "report")


def _produce_from_zone_b(login: Login, topic: str) -> None:
    """A client of zone-b (its client.id's tag) produces through this zone-a node."""
    from confluent_kafka import Producer

    p = Producer({**confluent(login), "client.id": "billing,zonegate_az=zone-b", "acks": "all"})
    for i in range(50):
        p.produce(topic, b"z" * 400 + str(i).encode())
    assert p.flush(30) == 0


def _report_by_tenant(data_dir: Path, out: Path) -> None:
    from zonegate.analytics.job import run_report
    from zonegate.analytics.source import locate
    from zonegate.cost_model import price_table

    usage = next(p for p in data_dir.rglob("usage") if p.is_dir()).parent
    with open(os.devnull, "w") as quiet:
        result = run_report(
            locate(usage.as_uri()),
            out,
            price_table("aws", "us-east-1"),
            progress=Progress(5, quiet),
        )
    rows = {r["principal"]: r for r in result.tables["cost_by_principal"]}
    for p, r in rows.items():
        print(
            f"{p}: {r['bytes']:,} B, {r['cross_zone_bytes']:,} B across, USD {r['total_usd']:.3g}"
        )
    assert set(rows) == {"User:alice", "User:admin", "User:ANONYMOUS"}
    for r in rows.values():
        assert r["bytes"] > 0 and r["produce_bytes"] > 0 and r["fetch_bytes"] > 0
        assert r["total_usd"] > 0
    # Only alice's zone-b client crossed zones: 50 records of 400-odd bytes and more.
    assert rows["User:alice"]["cross_zone_bytes"] > 50 * 400
    assert rows["User:admin"]["cross_zone_bytes"] == 0
    # The zone-b client's requests before its SASL login (ApiVersions, SaslHandshake) are
    # User:ANONYMOUS's, as Kafka's request context has them: no data, a few hundred bytes.
    anonymous = [
        r
        for r in result.tables["cost_by_principal_client"]
        if r["principal"] == "User:ANONYMOUS" and r["cross_zone_bytes"]
    ]
    assert [r["client_id"] for r in anonymous] == ["billing,zonegate_az=zone-b"]
    assert anonymous[0]["produce_bytes"] == anonymous[0]["fetch_bytes"] == 0
    assert anonymous[0]["cross_zone_bytes"] < 4096
    # The tenants sum to the report's totals.
    matrix = result.tables["matrix"]
    client = [r for r in matrix if r["kind"] != "forward_rpc"]
    assert sum(r["bytes"] for r in rows.values()) == sum(r["bytes"] for r in client)
    cross = sum(r["bytes"] for r in matrix if r["cross_zone"])
    assert sum(r["cross_zone_bytes"] + r["leader_rpc_cross_zone_bytes"] for r in rows.values()) == (
        pytest.approx(cross)
    )
    daily = result.tables["daily"]
    for col in ("total_usd", "s3_put_usd", "s3_get_usd", "s3_storage_usd"):
        assert sum(r[col] for r in rows.values()) == pytest.approx(sum(d[col] for d in daily)), col
    # Inside alice, the zone-b client is the one that crossed.
    clients = [
        r for r in result.tables["cost_by_principal_client"] if r["principal"] == "User:alice"
    ]
    crossed = {r["client_id"] for r in clients if r["cross_zone_bytes"]}
    assert crossed == {"billing,zonegate_az=zone-b"}
    assert sum(r["total_usd"] for r in clients) == pytest.approx(rows["User:alice"]["total_usd"])
    # zone-b never had a node: that is not an outage.
    assert result.tables["outage_cross_zone"] == []
