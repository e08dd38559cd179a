"""Accounting keys, totals and intervals, and how a request's bytes are attributed."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.proxy.accounting import account_request, cross_zone_reason, split
from zonegate.proxy.context import ClientInfo, RequestContext
from zonegate.services.api import ANONYMOUS
from zonegate.usage.accounting import (
    FORWARD_RPC,
    OTHER,
    PRODUCE_DATA,
    Accounting,
    Counts,
    TrafficKey,
)
from zonegate.usage.schema import OUTAGE, ROUTED

pytestmark = pytest.mark.unit


def _counts(c: Counts) -> tuple[int, int, int]:
    return (c.bytes_in, c.bytes_out, c.requests)


def test_same_key_adds_up_and_interval_drains() -> None:
    acc = Accounting(1, "zone-a")
    for _ in range(2):
        acc.add(
            PRODUCE_DATA,
            client_zone="zone-a",
            peer_zone="zone-a",
            leader_zone="zone-b",
            topic="t",
            client_id="c",
            bytes_in=10,
            bytes_out=1,
            requests=1,
        )
    acc.add(FORWARD_RPC, peer_zone="zone-b", leader_zone="zone-b", bytes_in=5, bytes_out=7)
    key = TrafficKey(PRODUCE_DATA, "zone-a", "zone-a", "zone-b", "t", "c")
    assert (key.kind, key.leader_zone, key.client_id) == (PRODUCE_DATA, "zone-b", "c")
    assert {k: _counts(c) for k, c in acc.totals.items()} == {
        key: (20, 2, 2),
        TrafficKey(FORWARD_RPC, "", "zone-b", "zone-b", "", ""): (5, 7, 0),
    }
    assert acc.cross_zone_bytes() == 12
    assert {k: _counts(c) for k, c in acc.drain_interval().items()}[key] == (20, 2, 2)
    assert acc.drain_interval() == {}
    assert _counts(acc.totals[key]) == (20, 2, 2)  # totals are cumulative


def _services(topics: dict[str, TopicInfo], zones: dict[int, str]) -> Any:
    return SimpleNamespace(
        accounting=Accounting(1, "zone-a"),
        topics=SimpleNamespace(get=topics.get),
        cluster=SimpleNamespace(
            zone_of=lambda n: zones.get(n, ""),
            zone_served=lambda zone, listener=None: True if zone in zones.values() else None,
        ),
    )


def _topic(name: str, leaders: list[int]) -> TopicInfo:
    tid = uuid.uuid4()
    return TopicInfo(
        tid, name, tuple(PartitionInfo(tid, name, i, 10 + i, n, 0) for i, n in enumerate(leaders))
    )


def _by_key(node: Any) -> dict[tuple[str, str], tuple[int, int, int]]:
    return {(k.topic, k.leader_zone): _counts(c) for k, c in node.accounting.totals.items()}


def test_produce_bytes_go_to_each_partitions_topic_and_leader_zone() -> None:
    # Topic a: partition 0 led in zone b, 1 in zone c; topic b: led by a node not live.
    node = _services({"a": _topic("a", [2, 3]), "b": _topic("b", [4])}, {2: "zone-b", 3: "zone-c"})
    ctx = RequestContext(
        node, ANONYMOUS, "PLAINTEXT", ClientInfo("10.0.0.1", 1, 1), "zone-a", 0, 9, 1, None, 1000
    )
    pd = SimpleNamespace
    body = SimpleNamespace(
        topic_data=[
            SimpleNamespace(
                name="a",
                partition_data=[pd(index=0, records=b"x" * 600), pd(index=1, records=None)],
            ),
            SimpleNamespace(name="b", partition_data=[pd(index=0, records=b"y" * 200)]),
        ]
    )
    account_request(ctx, body, 41)
    # 200 bytes of overhead and the 41-byte answer split 3:1 by the batches' sizes;
    # the partition that sent nothing gets nothing, and no even split by topic.
    assert _by_key(node) == {("a", "zone-b"): (750, 30, 1), ("b", ""): (250, 11, 0)}
    total = node.accounting.totals.values()
    assert sum(c.bytes_in for c in total) == 1000 and sum(c.bytes_out for c in total) == 41


def test_fetch_bytes_come_from_the_answers_batches() -> None:
    node = _services({"a": _topic("a", [2, 3, 2])}, {2: "zone-b", 3: "zone-c"})
    ctx = RequestContext(
        node, ANONYMOUS, "PLAINTEXT", ClientInfo("10.0.0.1", 1, 1), "zone-b", 1, 12, 1, "c", 77
    )
    body = SimpleNamespace(
        topics=[
            SimpleNamespace(topic="a", partitions=[SimpleNamespace(partition=i) for i in (0, 1, 2)])
        ]
    )
    part = SimpleNamespace
    answer = SimpleNamespace(
        responses=[
            SimpleNamespace(
                topic="a",
                partitions=[
                    part(partition_index=0, records=b"r" * 100),
                    part(partition_index=1, records=b"r" * 300),
                    part(partition_index=2, records=b""),
                ],
            )
        ]
    )
    account_request(ctx, body, 503, answer)
    assert _by_key(node) == {("a", "zone-b"): (19, 125, 1), ("a", "zone-c"): (58, 378, 0)}
    # An empty answer (nothing new, or throttled) splits evenly among the partitions asked.
    node2 = _services({"a": _topic("a", [2, 3, 2])}, {2: "zone-b", 3: "zone-c"})
    account_request(
        RequestContext(
            node2, ANONYMOUS, "PLAINTEXT", ClientInfo("h", 1, 1), "zone-b", 1, 12, 2, "c", 77
        ),
        body,
        30,
        SimpleNamespace(responses=()),
    )
    assert _by_key(node2) == {("a", "zone-b"): (51, 20, 1), ("a", "zone-c"): (26, 10, 0)}


def test_split_is_proportional_and_exact() -> None:
    assert split(10, [1, 1, 1]) == [3, 3, 4]
    assert split(7, [0, 0]) == [3, 4]
    assert split(0, [5, 5]) == [0, 0]
    assert sum(split(1_000_003, [17, 0, 991, 3])) == 1_000_003


def test_requests_about_no_topic_are_one_key() -> None:
    node = _services({}, {})
    client = ClientInfo("10.0.0.1", 1, 1)
    # Not produce or fetch (here ApiVersions): one key with no topic.
    account_request(
        RequestContext(node, ANONYMOUS, "PLAINTEXT", client, "zone-a", 18, 3, 2, "x", 30), None, 40
    )
    other = node.accounting.totals[
        TrafficKey(OTHER, "zone-a", "zone-a", "", "", "x", "User:ANONYMOUS")
    ]
    assert _counts(other) == (30, 40, 1)


@pytest.mark.parametrize(
    ("client_zone", "served", "reason"),
    [
        ("zone-a", False, ""),  # the node's own zone: nothing crossed
        ("", False, ""),  # no zone known
        ("zone-b", False, OUTAGE),  # zone-b has nodes, none live: a lost zone's client
        ("zone-b", True, ROUTED),  # zone-b has a live node the client did not reach
        ("zone-b", None, ROUTED),  # the cluster never had a node in zone-b
    ],
)
def test_a_client_of_another_zone_is_recorded_with_why_it_crossed(
    client_zone: str, served: bool | None, reason: str
) -> None:
    asked: list[tuple[str, str | None]] = []

    def zone_served(zone: str, listener: str | None = None) -> bool | None:
        asked.append((zone, listener))
        return served

    node = _services({}, {})
    node.cluster.zone_served = zone_served
    client = ClientInfo("10.0.0.1", 1, 1)
    ctx = RequestContext(node, ANONYMOUS, "SASL_PLAINTEXT", client, client_zone, 18, 3, 2, "x", 30)
    assert cross_zone_reason(ctx) == reason
    account_request(ctx, None, 40)
    (key,) = node.accounting.totals
    assert key.cross_zone_reason == reason and key.peer_zone == client_zone
    # The listener is the client's: a zone whose live nodes lack it serves none of its clients.
    assert asked == ([] if reason == "" else [(client_zone, "SASL_PLAINTEXT")] * 2)
