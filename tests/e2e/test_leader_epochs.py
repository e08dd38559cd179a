"""Consumers keep reading a partition whose leader moved (KIP-320 position validation).

kafka-python 3 and librdkafka check their position with OffsetForLeaderEpoch whenever a
partition's leader epoch goes up; a broker without the API leaves kafka-python unable to
fetch that partition ever again. Here a partition's leader is kill -9'd while consumers of
both clients are reading it through a node of their own zone; they must read on.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.static.primitive import i32

from tests.cluster_harness import Cluster, start_cluster
from tests.e2e.group_harness import wait_for
from tests.e2e.test_groups import Producer, create_topic
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.e2e
TOPIC, PARTS, EACH = "moved-leader", 4, 10


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = start_cluster(tmp_path / "cluster", ["zone-a", "zone-b"], 1)
    yield c
    c.stop()


def leaders(cluster: Cluster) -> dict[int, tuple[int, int]]:
    """partition -> (leader node, leader epoch), as the metadata store has them."""
    db = sqlite3.connect(f"file:{cluster.root / 'meta.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT p.partition, p.leader_node, p.leader_epoch FROM partitions p "
            "JOIN topics t USING (topic_id) WHERE t.name = ? AND t.deleted = 0",
            (TOPIC,),
        ).fetchall()
    finally:
        db.close()
    return {p: (node, epoch) for p, node, epoch in rows}


class Readers:
    """A kafka-python and a confluent-kafka consumer, each assigned every partition."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, TopicPartition
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KpTopicPartition

        self.kp = KafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, metadata_max_age_ms=500
        )
        self.kp.assign([KpTopicPartition(TOPIC, p) for p in range(PARTS)])
        self.kp.seek_to_beginning()
        self.ck = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "unused",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        self.ck.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTS)])
        self.seen: dict[str, dict[int, set[int]]] = {
            "kp": {p: set() for p in range(PARTS)},
            "ck": {p: set() for p in range(PARTS)},
        }

    def poll(self) -> None:
        for tp, msgs in self.kp.poll(timeout_ms=100).items():
            self.seen["kp"][tp.partition].update(m.offset for m in msgs)
        for m in self.ck.consume(num_messages=100, timeout=0.1):
            if m.error() is None:
                self.seen["ck"][m.partition()].add(m.offset())

    def have(self, n: int) -> bool:
        self.poll()
        return all(len(s) >= n for by_p in self.seen.values() for s in by_p.values())

    def report(self) -> dict[str, dict[int, int]]:
        return {c: {p: len(s) for p, s in by_p.items()} for c, by_p in self.seen.items()}

    def close(self) -> None:
        self.kp.close()
        self.ck.close()


def ask(node_port: int, parts: list[tuple[int, int, int]], topic: str = TOPIC) -> list[Any]:
    """OffsetForLeaderEpoch for (partition, current leader epoch, leader epoch) each."""
    conn = RawConnection(node_port)
    try:
        answer = conn.request(
            OffsetForLeaderEpochRequest(
                replica_id=i32(-1),
                topics=(
                    OffsetForLeaderTopic(
                        topic=topic,
                        partitions=tuple(
                            OffsetForLeaderPartition(
                                partition=i32(p),
                                current_leader_epoch=i32(cur),
                                leader_epoch=i32(epoch),
                            )
                            for p, cur, epoch in parts
                        ),
                    ),
                ),
            )
        )
    finally:
        conn.close()
    return list(answer.topics[0].partitions)


def test_consumers_read_on_after_the_leader_moves(cluster: Cluster) -> None:
    a, b = cluster.nodes
    create_topic(a.bootstrap, TOPIC, PARTS)
    before = leaders(cluster)
    moved = sorted(p for p, (node, _) in before.items() if node == b.node_id)
    stay = sorted(p for p, (node, _) in before.items() if node == a.node_id)
    assert moved and stay, f"placement put no partition on one of the nodes: {before}"

    prod = Producer(a.bootstrap, TOPIC, PARTS)
    prod.send(PARTS * EACH)
    readers = Readers(a.bootstrap)
    try:
        wait_for("both consumers read the first records", lambda: readers.have(EACH), 60)

        b.kill9()
        wait_for(
            "the controller to move the dead node's partitions",
            lambda: all(leaders(cluster)[p] == (a.node_id, 1) for p in moved),
            30,
        )
        prod.send(PARTS * EACH)
        deadline = time.monotonic() + 60
        while not readers.have(2 * EACH) and time.monotonic() < deadline:
            pass
        assert readers.have(2 * EACH), f"records read per partition: {readers.report()}"
    finally:
        readers.close()

    # Epoch 0 of a moved partition ended where epoch 1 began; the current epoch ends at
    # the high watermark; a partition that never moved is still in epoch 0.
    p, q = moved[0], stay[0]
    answers = ask(a.port, [(p, 1, 0), (p, 1, 1), (q, 0, 0), (p, -1, 0)])
    got = [(x.partition, x.error_code, x.leader_epoch, x.end_offset) for x in answers]
    assert got == [
        (p, ErrorCode.none, 0, EACH),
        (p, ErrorCode.none, 1, 2 * EACH),
        (q, ErrorCode.none, 0, 2 * EACH),
        (p, ErrorCode.none, 0, EACH),
    ]


def test_stale_and_unknown_epochs_get_kafkas_answers(cluster: Cluster) -> None:
    a, b = cluster.nodes
    create_topic(a.bootstrap, TOPIC, PARTS)
    Producer(a.bootstrap, TOPIC, PARTS).send(PARTS * EACH)
    moved = sorted(p for p, (node, _) in leaders(cluster).items() if node == b.node_id)
    assert moved
    b.kill9()
    wait_for("the move", lambda: all(leaders(cluster)[p] == (a.node_id, 1) for p in moved), 30)
    p = moved[0]
    answers = ask(a.port, [(p, 0, 0), (p, 5, 0), (p, 1, 7), (p, 1, -1), (PARTS, -1, 0)])
    got = [(x.partition, x.error_code, x.leader_epoch, x.end_offset) for x in answers]
    assert got == [
        (p, ErrorCode.fenced_leader_epoch, -1, -1),  # the client's metadata is behind
        (p, ErrorCode.unknown_leader_epoch, -1, -1),  # ahead of the leader
        (p, ErrorCode.none, -1, -1),  # an epoch that never was
        (p, ErrorCode.none, -1, -1),
        (PARTS, ErrorCode.unknown_topic_or_partition, -1, -1),
    ]
    (missing,) = ask(a.port, [(0, -1, 0)], topic="no-such-topic")
    assert missing.error_code is ErrorCode.unknown_topic_or_partition
