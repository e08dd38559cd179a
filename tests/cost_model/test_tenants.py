"""`zonegate cost --tenant`: a tenant mix priced, each tenant's cost adding up to the total,
one tenant alone costing what the single-workload model says, and bad tenants refused."""

from __future__ import annotations

import dataclasses
import json

import pytest

from zonegate.broker.cli import main
from zonegate.cost_model import Assumptions, Workload, price_table
from zonegate.cost_model.tenants import Tenant, parse_tenant, price_mix
from zonegate.cost_model.whatif import kafka_scenario, zonegate_scenario

pytestmark = pytest.mark.unit
AWS = price_table("aws", "us-east-1")
BASE = Workload(ingress_mib_s=0.0)


def test_one_tenant_costs_what_the_workload_model_says() -> None:
    mix = price_mix([Tenant("only", 10.0)], BASE, AWS)
    w = dataclasses.replace(BASE, ingress_mib_s=10.0)
    zg = zonegate_scenario(w, AWS, Assumptions(), "standard")
    for name, value in zg.as_dict().items():
        assert mix.zonegate.as_dict()[name] == pytest.approx(value), name
        assert mix.tenants[0].zonegate.as_dict()[name] == pytest.approx(value), name
    kafka = kafka_scenario(w, AWS, Assumptions(), fetch_from_follower=False)
    assert mix.kafka.total == pytest.approx(kafka.total)


def test_tenants_add_up_and_pay_for_what_they_do() -> None:
    tenants = [
        Tenant("alice", 10.0),
        Tenant("bob", 2.0, fanout=3.0, zones=1),
        Tenant("carol", 0.5, fanout=0.0, retention_hours=720.0),
    ]
    mix = price_mix(tenants, BASE, AWS)
    assert mix.cluster.ingress_mib_s == 12.5
    by = {c.tenant.name: c for c in mix.tenants}
    for line in ("cross_zone_transfer", "s3_put", "s3_get", "s3_storage", "total"):
        parts = sum(getattr(c.zonegate, line) for c in mix.tenants)
        assert parts == pytest.approx(getattr(mix.zonegate, line)), line
    # The cluster's S3 requests are priced once, for the combined workload.
    shared = zonegate_scenario(mix.cluster, AWS, Assumptions(), "standard")
    assert mix.zonegate.s3_put == pytest.approx(shared.s3_put)
    assert mix.zonegate.s3_get == pytest.approx(shared.s3_get)
    assert mix.zonegate.s3_storage == pytest.approx(shared.s3_storage)
    # PUTs by bytes produced; carol consumes nothing, so no tail reads are hers.
    assert by["alice"].zonegate.s3_put == pytest.approx(5 * by["bob"].zonegate.s3_put)
    assert by["carol"].zonegate.s3_get < by["alice"].zonegate.s3_get / 20
    # bob's consumers are in one zone: half the leader RPC bytes per MiB of alice's.
    per_mib = {n: by[n].zonegate.cross_zone_transfer / by[n].tenant.ingress_mib_s for n in by}
    assert per_mib["bob"] == pytest.approx(per_mib["alice"] / 2)
    # carol keeps 30 days, alice 3: ten times the storage per MiB/s.
    assert by["carol"].zonegate.s3_storage / 0.5 == pytest.approx(
        10 * by["alice"].zonegate.s3_storage / 10
    )


def test_parse_tenant() -> None:
    assert parse_tenant("bob=2,fanout=3,zones=1,retention-hours=24") == Tenant(
        "bob", 2.0, fanout=3.0, zones=1, retention_hours=24.0
    )
    for bad, message in (
        ("bob", "expected NAME=MIB_S"),
        ("bob=x", "could not convert"),
        ("bob=1,colour=red", "unknown field 'colour'"),
        ("bob=1,zones=0", "zones must be at least 1"),
        ("bob=-1", "must not be negative"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_tenant(bad)


def test_cli_prices_a_tenant_mix(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["cost", "--tenant", "alice=10", "--tenant", "bob=2,fanout=3,zones=1"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["tenants"]) == {"alice", "bob"}
    assert sum(t["total"] for t in out["tenants"].values()) == pytest.approx(out["total"]["total"])
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "alice" in table and "bob" in table and "Total" in table
    assert main(["cost"]) == 2
    assert "either --ingress-mib-s" in capsys.readouterr().err
    assert main(["cost", "--ingress-mib-s", "1", "--tenant", "a=1"]) == 2
    assert main(["cost", "--tenant", "a=1", "--tenant", "a=2"]) == 2
    assert "tenant names must differ" in capsys.readouterr().err
