"""The principal in the usage records (issue 25, schema 3): two SASL users and an
anonymous PLAINTEXT client each produce and consume through confluent-kafka, and every
Produce and Fetch record of their topics names who sent it, `User:alice`,
`User:admin`, `User:ANONYMOUS`; the report's facts carry it."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.security.certs import TestPki
from tests.security.client_configs import Login
from tests.security.roundtrip import VALUES, roundtrip
from tests.security.secure_node import PLAIN_USERS, SecureNode, security_properties

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
    assert {r["schema_version"] for r in rows} == {3}
    assert {r["principal"] for r in rows if r["kind"] in ("s3", "storage", "forward_rpc")} <= {""}
    # The report's facts keep the principal apart.
    from zonegate.analytics.facts import facts_of
    from zonegate.usage.schema import conform

    facts = facts_of(conform(_records(node.data_dir), "the node's records")).to_pylist()
    by_topic = {(f["topic"], f["principal"]) for f in facts if f["kind"] == "produce_data"}
    assert {(t, p) for p, t in topics.items()} <= by_topic
