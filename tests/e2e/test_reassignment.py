"""Partition reassignment and leader election with real admin clients, on three nodes.

kafka-python's admin client sends AlterPartitionReassignments,
ListPartitionReassignments and ElectLeaders as kafka-reassign-partitions and
kafka-leader-election do; confluent-kafka (librdkafka) elects leaders and reads
Metadata. Moves copy no data: a reassignment is done when answered, and an
idempotent producer writing meanwhile loses and duplicates nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.clients import ck_create_topic, ck_read_values, wait_until
from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(inprocess_factory: InProcessFactory) -> InProcessNode:
    # Real leaders in Metadata, and no auto rebalance moving partitions behind the test.
    node = inprocess_factory(["--zone-routing", "false", "--auto-leader-rebalance", "false"])
    wait_until(
        "every node seeing the three",
        lambda: all(len(n.membership.live_nodes()) == 3 for n in node.nodes),
        10,
    )
    return node


@pytest.fixture
def admin(cluster: InProcessNode) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    yield client
    client.close()


def _layout(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), from Metadata as librdkafka reads it."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {
        p.id: (p.leader, list(p.replicas), list(p.isrs))
        for p in md.topics[topic].partitions.values()
    }


def _wait_for(
    bootstrap: str, topic: str, layout: dict[int, tuple[int, list[int], list[int]]]
) -> None:
    """Until Metadata shows `layout`; librdkafka asks any node, so a later read may still
    meet a node that has not refreshed yet (within a few hundred ms)."""
    try:
        wait_until(f"{topic} laid out", lambda: _layout(bootstrap, topic) == layout, 30)
    except AssertionError:
        raise AssertionError(f"{topic}: {_layout(bootstrap, topic)}, not {layout}") from None


def _other(node: int) -> int:
    return node % 3 + 1


def test_reassign_moves_leaders_at_once_and_lists_nothing_in_progress(
    cluster: InProcessNode, admin: Any
) -> None:
    from kafka import TopicPartition
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    ck_create_topic(cluster.bootstrap, "moving", 3)
    before = _layout(cluster.bootstrap, "moving")
    assert all(replicas == [leader] == isr for leader, replicas, isr in before.values())
    target = {p: _other(leader) for p, (leader, _, _) in before.items()}
    tp = {p: TopicPartition("moving", p) for p in range(3)}

    result = admin.alter_partition_reassignments({tp[p]: [target[p]] for p in range(3)})
    assert result == {tp[p]: None for p in range(3)}
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments([tp[0]]) == {}
    # The node that answered shows it at once; the others at their next catalog refresh.
    after = {p: (target[p], [target[p]], [target[p]]) for p in range(3)}
    _wait_for(cluster.bootstrap, "moving", after)

    # A list of several nodes: the first is the preferred leader and leads; the others
    # are replicas zonegate does not keep (docs/compatibility.md).
    third = _other(target[0])
    assert admin.alter_partition_reassignments({tp[0]: [third, target[0]]}) == {tp[0]: None}
    _wait_for(cluster.bootstrap, "moving", {**after, 0: (third, [third], [third])})

    # Kafka's errors.
    errors = admin.alter_partition_reassignments(
        {
            tp[1]: None,  # cancel: nothing is in progress
            tp[2]: [99],  # no such node
            TopicPartition("moving", 7): [1],
            TopicPartition("no-such-topic", 0): [1],
        }
    )
    assert errors == {
        tp[1]: NoReassignmentInProgressError,
        tp[2]: InvalidReplicationAssignmentError,
        TopicPartition("moving", 7): UnknownTopicOrPartitionError,
        TopicPartition("no-such-topic", 0): UnknownTopicOrPartitionError,
    }
    dup = admin.alter_partition_reassignments({tp[1]: [1, 1]})
    assert dup == {tp[1]: InvalidReplicationAssignmentError}
    # Nothing refused moved anything.
    _wait_for(cluster.bootstrap, "moving", {**after, 0: (third, [third], [third])})


def test_reassignment_under_idempotent_load_loses_and_duplicates_nothing(
    cluster: InProcessNode, admin: Any
) -> None:
    from confluent_kafka import Producer
    from kafka import TopicPartition as KTP

    ck_create_topic(cluster.bootstrap, "busy", 3)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
        }
    )
    errors: list[str] = []
    sent = 0
    stop = threading.Event()

    def cb(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    def produce() -> None:
        nonlocal sent
        while not stop.is_set():
            producer.produce("busy", value=str(sent).encode(), partition=sent % 3, on_delivery=cb)
            sent += 1
            producer.poll(0.001 if sent % 50 else 0.01)

    worker = threading.Thread(target=produce)
    worker.start()
    try:
        wait_until("records flowing", lambda: sent > 300, 30)
        for _ in range(6):  # every partition around the three nodes, twice
            layout = _layout(cluster.bootstrap, "busy")
            moves = {KTP("busy", p): [_other(leader)] for p, (leader, _, _) in layout.items()}
            assert set(admin.alter_partition_reassignments(moves).values()) == {None}
            n = sent
            wait_until("more records", lambda n=n: sent > n + 100, 30)  # type: ignore[misc]
    finally:
        stop.set()
        worker.join()
    assert producer.flush(60) == 0
    assert not errors, errors[:5]

    seen = [int(v) for v in ck_read_values(cluster.bootstrap, "busy", 3, sent)]
    assert sorted(seen) == list(range(sent))  # none lost, none twice


def test_preferred_election_brings_a_moved_partition_home(
    cluster: InProcessNode, admin: Any
) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition as KTP

    ck_create_topic(cluster.bootstrap, "home", 2)
    before = _layout(cluster.bootstrap, "home")
    preferred = before[0][0]
    away = _other(preferred)
    # What a failover does: the leader moves, the preferred node stays (the controller's
    # own move, made here through the metadata store).
    node = cluster.nodes[0]
    sid = node.catalog.partition("home", 0).stream_id  # type: ignore[union-attr]
    cluster.call(node.meta.move_partitions([(sid, away)]))
    wait_until(
        "the moved leader in Metadata",
        lambda: (
            _layout(cluster.bootstrap, "home")[0] == (away, [preferred, away], [preferred, away])
        ),
        10,
    )

    ck = AdminClient({"bootstrap.servers": cluster.bootstrap})
    result = ck.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition("home", 0), TopicPartition("home", 1)]
    ).result(30)
    assert result[TopicPartition("home", 0)] is None
    assert "ELECTION_NOT_NEEDED" in str(result[TopicPartition("home", 1)])
    wait_until(
        "the preferred leader back",
        lambda: _layout(cluster.bootstrap, "home")[0] == (preferred, [preferred], [preferred]),
        10,
    )

    # All partitions (librdkafka sends a null list): none needs an election, and the
    # answer lists none, as Kafka's.
    assert ck.elect_leaders(ElectionType.PREFERRED, None).result(30) == {}
    # Unclean: every leader is live, so no election is needed.
    unclean = admin.elect_leaders(1, {"home": [0]}, raise_errors=False)
    [(topic, [(part, code, _)])] = [
        (r.topic, [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result])
        for r in unclean.replica_election_results
    ]
    assert (topic, part, code) == ("home", 0, 84)  # ELECTION_NOT_NEEDED
    assert admin.list_partition_reassignments([KTP("home", 0)]) == {}


def test_any_node_serves_a_reassignment_not_only_the_controller(cluster: InProcessNode) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    ck_create_topic(cluster.bootstrap, "anywhere", 1)
    leader = _layout(cluster.bootstrap, "anywhere")[0][0]
    target = _other(leader)
    # A node that holds no controller lease answers it, through the shared store.
    node = next(n for n in cluster.nodes if not n.controller.is_active)
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{node.port}")
    try:
        tp = TopicPartition("anywhere", 0)
        assert admin.alter_partition_reassignments({tp: [target]}) == {tp: None}
    finally:
        admin.close()
    _wait_for(cluster.bootstrap, "anywhere", {0: (target, [target], [target])})
