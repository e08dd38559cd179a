"""Every acknowledged record survives SIGTERM and kill -9, in order, at the same offset."""

from __future__ import annotations

import signal

import pytest

from tests.e2e import clients
from tests.e2e.conftest import NodeFactory
from tests.e2e.records_fixture import make_records
from tests.e2e.test_roundtrip import check_roundtrip

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill9"])
def test_acknowledged_records_survive_restart(node_factory: NodeFactory, sig: int) -> None:
    node = node_factory()
    topic = "durable"
    clients.ck_create_topic(node.bootstrap, topic, 4)
    first = make_records(400, "before")
    acks = clients.ck_produce(node.bootstrap, topic, first, 4, "lz4")

    node.stop(sig)
    node.restart()

    second = make_records(100, "after")
    acks2 = clients.kp_produce(node.bootstrap, topic, second, 4, "gzip")
    # Offsets continue where the acknowledged ones ended: nothing reused, nothing skipped.
    per_partition = {p: sum(1 for q, _ in acks if q == p) for p in range(4)}
    for p, off in acks2:
        assert off >= per_partition[p]
    all_recs, all_acks = first + second, acks + acks2
    counts = {p: sum(1 for q, _ in all_acks if q == p) for p in range(4)}
    check_roundtrip(all_recs, all_acks, clients.ck_consume(node.bootstrap, topic, counts))


def test_kill9_under_load_loses_no_acknowledged_record(node_factory: NodeFactory) -> None:
    """Kill -9 while a producer is mid-stream: all that was acked is there afterwards."""
    from confluent_kafka import Producer

    node = node_factory()
    topic = "under-load"
    clients.ck_create_topic(node.bootstrap, topic, 2)
    producer = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 5000,
        }
    )
    acked: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            acked[msg.partition()].append((msg.offset(), msg.value()))

    for i in range(3000):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2, on_delivery=on_delivery)
        producer.poll(0)
        if i == 1500:
            producer.flush(30)
            node.kill9()
    producer.flush(10)  # the rest fail or time out; only acks count
    node.restart()
    counts = {p: len(v) for p, v in acked.items()}
    assert counts[0] > 0 and counts[1] > 0
    got = clients.ck_consume(node.bootstrap, topic, counts)
    stored = {(c.partition, c.offset): c.value for c in got}
    for p, items in acked.items():
        for off, value in items:
            assert stored[(p, off)] == value
