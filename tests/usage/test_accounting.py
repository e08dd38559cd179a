"""Accounting keys, totals and intervals, and how a request's bytes are attributed."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.proxy.accounting import account_request
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


def test_request_bytes_split_among_topics_with_their_leader_zones() -> None:
    tid = uuid.uuid4()
    topics = {
        name: TopicInfo(tid, name, (PartitionInfo(tid, name, 0, i, leader, 0),))
        for i, (name, leader) in enumerate([("a", 2), ("b", 3)])
    }
    zones = {2: "zone-b"}  # node 3 is not live
    node: Any = SimpleNamespace(
        accounting=Accounting(1, "zone-a"),
        topics=SimpleNamespace(get=topics.get),
        cluster=SimpleNamespace(zone_of=lambda n: zones.get(n, "")),
    )
    client = ClientInfo("10.0.0.1", 1, 1)
    ctx = RequestContext(node, ANONYMOUS, "PLAINTEXT", client, "zone-a", 0, 9, 1, None, 101)
    body = SimpleNamespace(topic_data=[SimpleNamespace(name="a"), SimpleNamespace(name="b")])
    account_request(ctx, body, 11)
    assert {
        (k.topic, k.leader_zone, k.client_id): _counts(c) for k, c in node.accounting.totals.items()
    } == {
        ("a", "zone-b", ""): (51, 6, 1),
        ("b", "", ""): (50, 5, 0),
    }
    # Not produce or fetch (here ApiVersions): one key with no topic.
    account_request(
        RequestContext(node, ANONYMOUS, "PLAINTEXT", client, "zone-a", 18, 3, 2, "x", 30), None, 40
    )
    other = node.accounting.totals[TrafficKey(OTHER, "zone-a", "zone-a", "", "", "x")]
    assert _counts(other) == (30, 40, 1)
