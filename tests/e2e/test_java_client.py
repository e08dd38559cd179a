"""Apache Kafka's Java client against zonegate, and the same scenario against a real
Apache Kafka broker (tests/apache_kafka.py): the oracle that shows the scenario and
the harness are right, and a first differential check of admin errors.

The client runs as tests/java/src/.../ClientDriver.java (one JVM per call, JSON
lines out): an idempotent producer (acks=all), consumer groups with the classic
and the consumer (KIP-848) protocol whose second member resumes from the first
one's commits, and the admin client.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

from tests import java_peer
from tests.apache_kafka import ApacheKafkaBroker
from tests.node_harness import RunningNode

pytestmark = pytest.mark.e2e

PARTITIONS = 3
RECORDS = 300  # record i goes to partition i % 3 with key k-i, value v-i
FIRST_MEMBER = 120  # the first member handles this many, commits, leaves


@dataclass
class Target:
    name: str
    bootstrap: str
    port: int


def _target(request: pytest.FixtureRequest, name: str) -> Target:
    if name == "zonegate":
        node: RunningNode = request.getfixturevalue("session_node")
        return Target(name, node.bootstrap, node.port)
    broker: ApacheKafkaBroker = request.getfixturevalue("apache_kafka")
    return Target(name, broker.bootstrap, broker.port)


@dataclass
class Produced:
    target: Target
    topic: str
    acks: list[dict[str, Any]]


@pytest.fixture(scope="module", params=["zonegate", "apache-kafka"])
def produced(request: pytest.FixtureRequest) -> Produced:
    """A 3-partition topic holding RECORDS records from the Java idempotent producer."""
    target = _target(request, request.param)
    topic = "java-client-records"
    out = java_peer.client("admin", target.bootstrap, f"create:{topic}:{PARTITIONS}")
    assert out == [{"op": "create", "arg": topic, "ok": True}]
    lines = java_peer.client("produce", target.bootstrap, topic, str(RECORDS), str(PARTITIONS))
    assert lines[-1] == {"event": "produced", "count": RECORDS}
    return Produced(target, topic, [x for x in lines if x["event"] == "ack"])


def test_idempotent_producer_offsets_are_contiguous_in_send_order(produced: Produced) -> None:
    assert [a["i"] for a in produced.acks] == list(range(RECORDS))
    per_partition: dict[int, list[int]] = defaultdict(list)
    for a in produced.acks:
        assert a["p"] == a["i"] % PARTITIONS
        per_partition[a["p"]].append(a["o"])
    for p in range(PARTITIONS):
        # Sent in this order by one idempotent producer: acked at 0, 1, 2, ... each.
        assert per_partition[p] == list(range(RECORDS // PARTITIONS)), p


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_reads_each_record_once_in_order_and_resumes(
    produced: Produced, protocol: str
) -> None:
    bootstrap, topic = produced.target.bootstrap, produced.topic
    group = f"java-{protocol}"
    first = java_peer.client(
        "consume", bootstrap, topic, group, protocol, str(FIRST_MEMBER), "60000"
    )
    done = first[-1]
    assert done["event"] == "committed" and done["count"] == FIRST_MEMBER
    assert done["assigned"] == list(range(PARTITIONS))
    first_records = [r for r in first if r["event"] == "record"]
    # What the first member committed is exactly the offset after the last it handled.
    last: dict[int, int] = {}
    for r in first_records:
        last[r["p"]] = r["o"]
    assert done["offsets"] == {
        str(p): (last[p] + 1 if p in last else None) for p in range(PARTITIONS)
    }

    rest = RECORDS - FIRST_MEMBER
    second = java_peer.client("consume", bootstrap, topic, group, protocol, str(rest), "60000")
    assert second[-1]["count"] == rest
    assert second[-1]["offsets"] == {str(p): RECORDS // PARTITIONS for p in range(PARTITIONS)}

    seen: dict[int, list[int]] = defaultdict(list)
    for r in first_records + [r for r in second if r["event"] == "record"]:
        i = r["o"] * PARTITIONS + r["p"]
        assert (r["k"], r["v"]) == (f"k-{i}", f"v-{i}")
        seen[r["p"]].append(r["o"])
    for p in range(PARTITIONS):
        # Every record once, in offset order, across both members.
        assert seen[p] == list(range(RECORDS // PARTITIONS)), p

    described = java_peer.client("admin", bootstrap, f"describe-group:{group}")
    expected_type = {"classic": "Classic", "consumer": "Consumer"}[protocol]
    assert described == [
        {
            "op": "describe-group",
            "arg": group,
            "ok": True,
            "type": expected_type,
            "state": "Empty",
            "members": 0,
        }
    ]


@pytest.mark.parametrize("name", ["zonegate", "apache-kafka"])
def test_admin_creates_describes_and_deletes_topics(
    request: pytest.FixtureRequest, name: str
) -> None:
    target = _target(request, name)
    topic = "java-admin-topic"
    out = java_peer.client(
        "admin",
        target.bootstrap,
        f"create:{topic}:4:retention.ms=3600000",
        f"describe:{topic}",
        "list",
        "cluster",
        f"delete:{topic}",
        "list",
    )
    create, describe, listed, cluster, delete, listed_after = out
    assert create == {"op": "create", "arg": topic, "ok": True}
    assert describe["ok"] and describe["internal"] is False
    assert [p["p"] for p in describe["partitions"]] == [0, 1, 2, 3]
    node_ids = {n["id"] for n in cluster["nodes"]}
    for p in describe["partitions"]:
        assert p["leader"] in node_ids and p["replicas"] and set(p["replicas"]) <= node_ids
    assert topic in listed["topics"]
    assert cluster["cluster_id"]
    assert target.port in [n["port"] for n in cluster["nodes"]]
    assert cluster["controller"] in node_ids
    assert delete == {"op": "delete", "arg": topic, "ok": True}
    if name == "apache-kafka":
        # Kafka's deletion completes at the controller; its broker's metadata cache learns
        # of it moments later, so a list right after may still name the topic.
        deadline = time.monotonic() + 15
        while topic in listed_after["topics"] and time.monotonic() < deadline:
            (listed_after,) = java_peer.client("admin", target.bootstrap, "list")
    assert topic not in listed_after["topics"]


# The differential check: one admin script run against both, each call's outcome
# compared by the error Kafka's client raised (class and code). Intended differences,
# not compared: the messages' wording, node ids, the cluster id.
DIFF_TOPIC = "java-diff"
DIFF_SCRIPT = {
    "create a topic": f"create:{DIFF_TOPIC}:1",
    "create an existing topic": f"create:{DIFF_TOPIC}:1",
    "describe an unknown topic": "describe:java-diff-missing",
    "delete an unknown topic": "delete:java-diff-missing",
    "create with an unknown config name": "create:java-diff-cfg:1:no.such.config=1",
    "create with zero partitions": "create:java-diff-zero:0",
    "create with an illegal name": "create:java diff!:1",
    "delete a topic": f"delete:{DIFF_TOPIC}",
}


@pytest.fixture(scope="module")
def admin_outcomes(
    session_node: RunningNode, apache_kafka: ApacheKafkaBroker
) -> dict[str, dict[str, dict[str, Any]]]:
    outcomes = {}
    for name, bootstrap in (
        ("zonegate", session_node.bootstrap),
        ("kafka", apache_kafka.bootstrap),
    ):
        lines = java_peer.client("admin", bootstrap, *DIFF_SCRIPT.values())
        assert len(lines) == len(DIFF_SCRIPT), lines
        outcomes[name] = dict(zip(DIFF_SCRIPT, lines, strict=True))
    return outcomes


def _kind(line: dict[str, Any]) -> tuple[str, int] | str:
    return (line["error"], line["code"]) if "error" in line else "ok"


@pytest.mark.parametrize("case", list(DIFF_SCRIPT))
def test_admin_outcome_matches_apache_kafka(
    admin_outcomes: dict[str, dict[str, dict[str, Any]]], case: str
) -> None:
    kafka, zonegate = admin_outcomes["kafka"][case], admin_outcomes["zonegate"][case]
    assert _kind(zonegate) == _kind(kafka), (zonegate, kafka)
