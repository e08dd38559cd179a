"""The report over synthetic usage records on local disk reproduces what was generated,
whichever engine sums the records."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from zonegate.analytics.facts import FACT_KEYS, FACTS_SCHEMA, arrow_facts
from zonegate.analytics.source import locate
from zonegate.analytics.synthetic import Truth, write_local
from zonegate.analytics.tables import LEADER_RPCS, NO_CLIENT_ID, NO_TOPIC, report_tables
from zonegate.cost_model import UsageTotals, cost_of_usage, kafka_cost, price_table, usage_rates
from zonegate.cost_model.kafka import LeaderCross

from .test_tenants import SPEC, _tenant_objects

pytestmark = pytest.mark.integration
AWS = price_table("aws", "us-east-1")


def test_matrix_matches_generated_flows(report: tuple[Any, Truth, Path]) -> None:
    result, truth, _ = report
    got = {(r["kind"], r["from_zone"], r["to_zone"]): r["bytes"] for r in result.tables["matrix"]}
    assert got == {k: v for k, v in truth.flows.items() if v}
    for r in result.tables["matrix"]:
        assert r["cross_zone"] == (r["from_zone"] != r["to_zone"])


def test_record_count_and_traffic_by_topic_and_client(report: tuple[Any, Truth, Path]) -> None:
    result, truth, _ = report
    assert result.records == truth.rows
    rate = usage_rates(AWS).cross_zone_per_byte
    for table, key, by_bytes, by_cross, produced, fetched in (
        (
            "cost_by_topic",
            "topic",
            truth.bytes_by_topic,
            truth.cross_zone_by_topic,
            truth.produce_by_topic,
            None,
        ),
        (
            "cost_by_client",
            "client_id",
            truth.bytes_by_client,
            truth.cross_zone_by_client,
            None,
            truth.fetch_by_client,
        ),
    ):
        rows = {r[key]: r for r in result.tables[table]}
        # Every topic and client is named; traffic about none is labelled by what it is.
        assert set(rows) == set(by_bytes)
        assert "(none)" not in rows and "" not in rows
        for label, r in rows.items():
            assert r["bytes"] == by_bytes[label], label
            assert r["cross_zone_bytes"] == by_cross.get(label, 0), label
            assert r["transfer_usd"] == pytest.approx(by_cross.get(label, 0) * rate)
            if produced is not None:
                assert r["produce_bytes"] == produced.get(label, 0), label
            if fetched is not None:
                assert r["fetch_bytes"] == fetched.get(label, 0), label
    topics = [r["topic"] for r in result.tables["cost_by_topic"]]
    assert {f"topic-{t}" for t in range(4)} <= set(topics)
    assert LEADER_RPCS not in topics  # synthetic leader RPCs carry their topic
    costs = [r["transfer_usd"] for r in result.tables["cost_by_topic"]]
    assert costs == sorted(costs, reverse=True)


def test_leader_rpcs_without_a_topic_are_named_as_such() -> None:
    # A real node counts its leader RPCs with no topic and no client id (the Append
    # batches many); the report names that traffic instead of "(none)".
    facts = pa.Table.from_pylist(
        [
            _fact("forward_rpc", "a", "b", "", "", bytes_out=100),
            _fact("produce_data", "a", "a", "orders", "shop", bytes_in=1000, bytes_out=50),
            _fact("other", "a", "a", "", "", bytes_in=10, bytes_out=20),
        ],
        schema=FACTS_SCHEMA,
    )
    t = report_tables(facts, usage_rates(AWS))
    topics = {r["topic"]: r for r in t.cost_by_topic}
    clients = {r["client_id"]: r for r in t.cost_by_client}
    assert topics[LEADER_RPCS]["cross_zone_bytes"] == 100
    assert clients[LEADER_RPCS]["cross_zone_bytes"] == 100
    assert topics["orders"]["produce_bytes"] == 1000 and topics["orders"]["bytes"] == 1050
    assert clients["shop"]["cross_zone_bytes"] == 0
    assert topics[NO_TOPIC]["bytes"] == 30 and clients[NO_CLIENT_ID]["bytes"] == 30


def _fact(
    kind: str, node_zone: str, peer_zone: str, topic: str, client_id: str, **sums: int
) -> dict[str, Any]:
    row: dict[str, Any] = {n: 0 for n in FACTS_SCHEMA.names}
    row.update(
        schema_version=1,
        day="2026-01-01",
        kind=kind,
        node_zone=node_zone,
        peer_zone=peer_zone,
        topic=topic,
        client_id=client_id,
        s3_purpose="",
        principal="",
        outage_window="",
        records=1,
        stored_byte_seconds=0.0,
        **sums,
    )
    return row


def test_both_engines_sum_the_same_facts(
    spark: Any, synthetic_store: tuple[Path, Truth], tmp_path: Path
) -> None:
    from zonegate.analytics.spark_engine import spark_facts

    # The synthetic store, and records of two tenants with an outage (principals and
    # outage windows in the facts' keys).
    tenants = tmp_path / "tenants"
    write_local(_tenant_objects(SPEC), tenants)
    for root in (synthetic_store[0], tenants):
        loc = locate(root.as_uri())
        by_arrow, by_spark = arrow_facts(loc), spark_facts(spark, loc)

        def rows(t: pa.Table) -> list[dict[str, Any]]:
            return sorted(t.to_pylist(), key=lambda r: tuple(str(r[k]) for k in FACT_KEYS))

        a, b = rows(by_arrow), rows(by_spark)
        assert len(a) == len(b) > 0
        for x, y in zip(a, b, strict=True):
            assert x["stored_byte_seconds"] == pytest.approx(y.pop("stored_byte_seconds"))
            x.pop("stored_byte_seconds")
            assert x == y
    assert {r["outage_window"] for r in a} == {"", "2025-01-01 00:00", "2025-01-02 00:00"}
    assert {r["principal"] for r in a} == {"", "User:alice", "User:bob"}


def test_costs_add_up_to_cost_of_usage_of_the_totals(report: tuple[Any, Truth, Path]) -> None:
    result, truth, _ = report
    expected = cost_of_usage(
        UsageTotals(
            cross_zone_bytes=truth.cross_zone_bytes,
            s3_put_requests=truth.s3_put_requests,
            s3_get_requests=truth.s3_get_requests,
            s3_other_requests=truth.s3_other_requests,
            s3_put_bytes=truth.s3_put_bytes,
            s3_get_bytes=truth.s3_get_bytes,
            stored_byte_seconds=truth.stored_byte_seconds,
        ),
        usage_rates(AWS),
    )
    measured = result.tables["savings"][0]
    assert measured["scenario"].startswith("zonegate")
    for item, value in expected.as_dict().items():
        assert measured[f"{item}_usd"] == pytest.approx(value), item
    zone_total = sum(r["total_usd"] for r in result.tables["cost_by_zone"])
    day_total = sum(r["total_usd"] for r in result.tables["daily"])
    assert zone_total == pytest.approx(expected.total)
    assert day_total == pytest.approx(expected.total)
    assert [r["day"] for r in result.tables["daily"]] == sorted(truth.days)


def test_kafka_baseline_from_the_same_traffic(report: tuple[Any, Truth, Path]) -> None:
    result, truth, _ = report
    kafka = kafka_cost(
        truth.produce_bytes,
        truth.fetch_bytes,
        truth.stored_byte_seconds,
        3,
        AWS,
        fetch_from_follower=False,
        # Client-to-leader crossings as the records measured them, per partition leader.
        leader_cross=LeaderCross(truth.leader_cross_produce, truth.leader_cross_fetch),
    )
    assert truth.leader_cross_produce > 0 and truth.leader_cross_fetch > 0
    row = result.tables["savings"][1]
    assert row["total_usd"] == pytest.approx(kafka.total)
    assert row["zonegate_saves_usd"] == pytest.approx(
        kafka.total - result.tables["savings"][0]["total_usd"]
    )


def test_outputs_written_as_parquet_csv_and_html(report: tuple[Any, Truth, Path]) -> None:
    result, _, out = report
    import pyarrow.parquet as pq

    for name, rows in result.tables.items():
        assert pq.read_table(out / "parquet" / name).num_rows == len(rows)
        (part,) = (out / "csv" / name).glob("part-*.csv")
        with part.open() as f:
            assert len(list(csv.DictReader(f))) == len(rows)
    assert json.loads((out / "report.json").read_text())["complete"] is True
    html = (out / "dashboard.html").read_text()
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org", "")
    assert not list(out.parent.glob(".out.partial-*"))
    progress = (out.parent / "progress.txt").read_text()
    assert "[5/5]" in progress and "done:" in progress


def test_schema_1_records_are_read_and_priced_by_the_formula(tmp_path: Path) -> None:
    # Records written before schema 2: no S3 purpose, LIST and DELETE in one count,
    # one leader zone per topic. The report reads them, names their S3 requests as of
    # no purpose, and prices Kafka's client-to-leader crossings by the formula.
    import dataclasses

    from zonegate.analytics.job import run_report
    from zonegate.analytics.progress import Progress
    from zonegate.analytics.synthetic import SyntheticSpec, generate, write_local
    from zonegate.analytics.tables import NO_PURPOSE

    spec = SyntheticSpec(days=1, intervals_per_day=2, topics=2, clients_per_zone=1)
    truth = Truth()
    write_local(generate(dataclasses.replace(spec, schema_version=1), truth), tmp_path / "s")
    result = run_report(
        locate((tmp_path / "s").as_uri()), tmp_path / "out", AWS, progress=Progress(5, live=False)
    )
    purposes = result.tables["s3_by_purpose"]
    assert [r["purpose"] for r in purposes] == [NO_PURPOSE]
    assert purposes[0]["other_requests"] == truth.s3_other_requests
    assert purposes[0]["put_requests"] == truth.s3_put_requests
    (day,) = result.tables["daily"]
    assert day["leader_cross_produce_bytes"] == day["leader_cross_fetch_bytes"] == 0
    assert truth.leader_cross_produce == 0  # the truth counts no measured crossing either
    unknown_p, unknown_f = day["leader_unknown_produce_bytes"], day["leader_unknown_fetch_bytes"]
    assert unknown_p > truth.produce_bytes and unknown_f > truth.fetch_bytes  # both ways
    kafka = kafka_cost(
        truth.produce_bytes,
        truth.fetch_bytes,
        truth.stored_byte_seconds,
        3,
        AWS,
        fetch_from_follower=False,
        leader_cross=LeaderCross(unknown_p * 2 / 3, unknown_f * 2 / 3),
    )
    assert result.tables["savings"][1]["total_usd"] == pytest.approx(kafka.total)
