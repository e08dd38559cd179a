"""The report over synthetic usage records on local disk reproduces what was generated."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from zonegate.analytics.synthetic import Truth
from zonegate.cost_model import UsageTotals, cost_of_usage, kafka_baseline, price_table, usage_rates

pytestmark = pytest.mark.integration
AWS = price_table("aws", "us-east-1")


def test_matrix_matches_generated_flows(report: tuple[Any, Truth, Path]) -> None:
    result, truth, _ = report
    got = {(r["kind"], r["from_zone"], r["to_zone"]): r["bytes"] for r in result.tables["matrix"]}
    assert got == {k: v for k, v in truth.flows.items() if v}
    for r in result.tables["matrix"]:
        assert r["cross_zone"] == (r["from_zone"] != r["to_zone"])


def test_record_count_and_transfer_by_topic_and_client(report: tuple[Any, Truth, Path]) -> None:
    result, truth, _ = report
    assert result.records == truth.rows
    rate = usage_rates(AWS).cross_zone_per_byte
    by_topic = {r["topic"]: r for r in result.tables["cost_by_topic"]}
    expected = {(t or "(none)"): b for t, b in truth.cross_zone_by_topic.items()}
    assert {t: r["cross_zone_bytes"] for t, r in by_topic.items()} == expected
    for t, r in by_topic.items():
        assert r["transfer_usd"] == pytest.approx(expected[t] * rate)
    by_client = {r["client_id"]: r["cross_zone_bytes"] for r in result.tables["cost_by_client"]}
    assert by_client == {(c or "(none)"): b for c, b in truth.cross_zone_by_client.items()}


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
    kafka = kafka_baseline(
        truth.produce_bytes,
        truth.fetch_bytes,
        truth.stored_byte_seconds,
        3,
        AWS,
        fetch_from_follower=False,
    )
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
