"""Cost of measured usage, the price tables' provenance, and `zonegate cost`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zonegate.broker.cli import main
from zonegate.cost_model import PRICE_TABLES, UsageTotals, cost_of_usage, price_table, usage_rates
from zonegate.cost_model.breakdown import MONTH_S
from zonegate.cost_model.prices import GIB

pytestmark = pytest.mark.unit
DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_cost_of_usage_hand_computed() -> None:
    t = UsageTotals(
        cross_zone_bytes=10 * GIB,
        s3_put_requests=2000,
        s3_get_requests=10_000,
        s3_other_requests=1000,
        stored_byte_seconds=100 * GIB * MONTH_S,  # 100 GiB for a month
    )
    c = cost_of_usage(t, usage_rates(price_table("aws", "us-east-1")))
    assert c.cross_zone_transfer == pytest.approx(0.2)
    assert c.s3_put == pytest.approx(3 * 0.005)
    assert c.s3_get == pytest.approx(10 * 0.0004)
    assert c.s3_storage == pytest.approx(2.3)
    assert c.total == pytest.approx(0.2 + 0.015 + 0.004 + 2.3)


def test_gcp_bills_only_the_sending_side() -> None:
    c = cost_of_usage(
        UsageTotals(cross_zone_bytes=GIB), usage_rates(price_table("gcp", "us-central1"))
    )
    assert c.cross_zone_transfer == pytest.approx(0.01)


def test_every_price_has_a_source_and_date_in_docs() -> None:
    prices_md = (DOCS / "prices.md").read_text()
    for t in PRICE_TABLES:
        for src in (t.cross_zone_source, t.block_storage_source, t.standard.source):
            assert src.url and src.stated
            assert src.url in prices_md, src.url
        assert f"{t.provider} {t.region}" in prices_md or t.region in prices_md


def test_cli_cost_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--ingress-mib-s", "1024", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["Kafka RF=3 + FFF"]["cross_zone_transfer"] == pytest.approx(138_240.0)
    assert main(["cost", "--ingress-mib-s", "10", "--wal-seal-size", "4MiB"]) == 0
    table = capsys.readouterr().out
    for label in (
        "Cross-zone transfer",
        "S3 PUT",
        "S3 GET",
        "S3 storage",
        "Block storage",
        "Total",
    ):
        assert label in table
    assert "zonegate" in table and "S3-WAL" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider", "ibm"], "unknown provider"),
        (["--region", "mars-1"], "unknown region"),
        (["--provider", "azure", "--region", "eastus", "--storage-class", "express"], "express"),
    ],
)
def test_cli_cost_bad_input(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cost", "--ingress-mib-s", "1", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--zones", "0"], "argument --zones: must be at least 1, got 0"),
        (["--ingress-mib-s", "-5"], "argument --ingress-mib-s: must be at least 0, got -5"),
        (["--fanout", "-1"], "argument --fanout: must be at least 0, got -1"),
        (["--wal-seal-age-ms", "0"], "argument --wal-seal-age-ms: must be more than 0 ms"),
        (["--wal-seal-size", "8 parsecs"], "argument --wal-seal-size: expected a size"),
        (["--wal-put-ms", "0"], "argument --wal-put-ms: must be more than 0 ms"),
        (["--wal-seal-when-idle", "maybe"], "argument --wal-seal-when-idle: invalid choice"),
    ],
)
def test_cli_cost_names_the_wrong_value(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["cost", "--ingress-mib-s", "1", *args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_cost_one_zone_moves_nothing_across_zones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--ingress-mib-s", "10", "--zones", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    scenarios = {name: s for name, s in out.items() if "cross_zone_transfer" in s}
    assert len(scenarios) == 4
    assert {name: s["cross_zone_transfer"] for name, s in scenarios.items()} == dict.fromkeys(
        scenarios, 0.0
    )
    assert main(["cost", "--ingress-mib-s", "10", "--zones", "1"]) == 0
    assert "one zone (no cross-zone traffic)" in capsys.readouterr().out.splitlines()[0]


def test_cli_cost_wal_put_time_and_group_commit(capsys: pytest.CaptureFixture[str]) -> None:
    def wal_usd(*args: str) -> float:
        assert main(["cost", "--ingress-mib-s", "140", "--days", "1", "--json", *args]) == 0
        by_purpose = json.loads(capsys.readouterr().out)["zonegate_s3_request_usd_by_purpose"]
        return float(by_purpose["wal"])

    # 3 nodes, 46.7 MiB/s each: an object per 100 ms upload cycle (the default),
    # twice as many at 50 ms, and 8 MiB objects (5.8/s a node) without group commit.
    assert wal_usd() == pytest.approx(30 * 86_400 * 0.005 / 1000)
    assert wal_usd("--wal-put-ms", "50") == pytest.approx(60 * 86_400 * 0.005 / 1000)
    assert wal_usd("--wal-seal-when-idle", "false") == pytest.approx(
        140 / 8 * 86_400 * 0.005 / 1000
    )
    # The table says what it assumed.
    assert main(["cost", "--ingress-mib-s", "140"]) == 0
    assert (
        "zonegate's WAL: 10 objects/s per node of 4.67 MiB (group commit, 100 ms upload cycle;"
        in capsys.readouterr().out
    )
    assert main(["cost", "--ingress-mib-s", "140", "--wal-seal-when-idle", "false"]) == 0
    assert "5.83 objects/s per node of 8 MiB (no group commit;" in capsys.readouterr().out
