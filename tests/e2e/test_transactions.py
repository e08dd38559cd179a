"""Transactions with real clients: confluent-kafka's transactional producer (librdkafka),
aiokafka's and kafka-python's, and read_committed consumers against one node
(docs/transactions.md).

Each case is what a user of Kafka 4 sees: a commit visible, an abort invisible (its
records and the markers take offsets, read_uncommitted sees the aborted records), offsets
sent to the transaction visible to the group only once it commits, a zombie producer
fenced by a new one with the same transactional.id (its error fatal), a
transaction.timeout.ms over transaction.max.timeout.ms refused, and a transaction left
open past its timeout aborted by the coordinator, which fences its producer.
One node serves the whole module; each case names its own topics and ids.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import clients
from tests.node_harness import RunningNode, start_node

pytestmark = pytest.mark.e2e

MAX_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def txn_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    node = start_node(
        Path(tmp_path_factory.mktemp("txn-node")),
        [
            "--group-initial-rebalance-delay-ms",
            "0",
            "--transaction-max-timeout-ms",
            str(MAX_TIMEOUT_MS),
            # The coordinator looks for timed-out transactions every half second.
            "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
            "500",
        ],
    )
    try:
        yield node
    finally:
        if node.alive():
            node.stop()


def _producer(bootstrap: str, tid: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra}
    )


def _read(
    bootstrap: str, topic: str, partitions: int, isolation: str, until: int = 0
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record of the topic up to each partition's end
    for this isolation level (read_committed: the last stable offset), read again until
    there are at least `until` (or 30 s passed): as in Kafka, EndTxn is answered once the
    decision is durable, and the markers that move the LSO follow."""
    deadline = time.monotonic() + 30
    while True:
        rows = _read_once(bootstrap, topic, partitions, isolation)
        if len(rows) >= until or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def _read_once(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 30
) -> list[tuple[int, int, bytes]]:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    ended: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(ended) < partitions:
            assert time.monotonic() < deadline, f"no end of {topic} within {timeout:.0f} s"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                ended.add(m.partition())
                continue
            ended.discard(m.partition())
            out.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    return sorted(out)


def _values(rows: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(v for _, _, v in rows)


def test_commit_is_visible_and_abort_is_not(txn_node: RunningNode) -> None:
    bootstrap, topic = txn_node.bootstrap, "txn-basic"
    clients.ck_create_topic(bootstrap, topic, 2)
    p = _producer(bootstrap, "txn-basic-id")
    p.init_transactions(30)
    for tag, commit in (("a", True), ("b", False), ("c", True)):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, value=f"{tag}{i}".encode(), partition=i % 2)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)  # the aborted records are in the log: read_uncommitted sees them
            p.abort_transaction(30)
    committed = [f"{t}{i}".encode() for t in "ac" for i in range(10)]
    rows = _read(bootstrap, topic, 2, "read_committed", until=20)
    assert _values(rows) == sorted(committed)
    everything = _read(bootstrap, topic, 2, "read_uncommitted", until=30)
    assert _values(everything) == sorted(committed + [f"b{i}".encode() for i in range(10)])
    # Three markers per partition take offsets, as in Kafka: 5 + 5 + 5 records and 3 markers.
    for partition in (0, 1):
        clients.wait_until(
            "the markers", lambda p=partition: clients.ck_watermarks(bootstrap, topic, p)[1] == 18
        )
        offsets = [o for q, o, _ in rows if q == partition]
        assert offsets == [*range(0, 5), *range(12, 17)]


def _group_offsets(bootstrap: str, group: str, topic: str) -> int | None:
    """The group's committed offset, as a read_uncommitted consumer asks it (librdkafka's
    read_committed asks with require_stable: it waits while an offset is pending)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_uncommitted"}
    )
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=10)
        return None if tp.offset < 0 else int(tp.offset)
    finally:
        c.close()


def test_offsets_sent_to_a_transaction_are_the_groups_after_commit(
    txn_node: RunningNode,
) -> None:
    """Consume-transform-produce: the input offsets committed with the output, visible to
    the group only when the transaction commits, never when it aborts."""
    from confluent_kafka import Consumer, TopicPartition

    bootstrap, source, sink, group = txn_node.bootstrap, "txn-in", "txn-out", "txn-group"
    clients.ck_create_topic(bootstrap, source, 1)
    clients.ck_create_topic(bootstrap, sink, 1)
    feed = _producer(bootstrap, "txn-feed")
    feed.init_transactions(30)
    feed.begin_transaction()
    for i in range(20):
        feed.produce(source, value=b"in%d" % i, partition=0)
    feed.commit_transaction(30)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    p = _producer(bootstrap, "txn-ctp")
    p.init_transactions(30)
    try:
        for commit in (True, False):
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 10 and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m)
            assert len(got) == 10
            p.begin_transaction()
            for m in got:
                p.produce(sink, value=b"out-" + m.value(), partition=0)
            position = [TopicPartition(source, 0, got[-1].offset() + 1)]
            p.send_offsets_to_transaction(position, consumer.consumer_group_metadata(), 30)
            p.flush(30)
            before = _group_offsets(bootstrap, group, source)
            assert before is None if commit else before == 10
            if commit:
                p.commit_transaction(30)
                # The group's offset moves with the commit's markers.
                clients.wait_until(
                    "the committed offset", lambda: _group_offsets(bootstrap, group, source) == 10
                )
            else:
                p.abort_transaction(30)
                assert _group_offsets(bootstrap, group, source) == 10
    finally:
        consumer.close()
    assert _values(_read(bootstrap, sink, 1, "read_committed", until=10)) == sorted(
        b"out-in%d" % i for i in range(10)
    )


def test_a_zombie_is_fenced_by_a_new_producer_of_the_same_id(txn_node: RunningNode) -> None:
    from confluent_kafka import KafkaException

    bootstrap, topic = txn_node.bootstrap, "txn-fence"
    clients.ck_create_topic(bootstrap, topic, 1)
    zombie = _producer(bootstrap, "txn-fence-id")
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(30)
    fresh = _producer(bootstrap, "txn-fence-id")
    fresh.init_transactions(30)  # aborts the zombie's open transaction, bumps the epoch
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh", partition=0)
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic, value=b"late", partition=0)
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal(), error
    assert _values(_read(bootstrap, topic, 1, "read_committed", until=1)) == [b"fresh"]


def test_a_timeout_over_the_maximum_is_refused(txn_node: RunningNode) -> None:
    from confluent_kafka import KafkaError, KafkaException

    p = _producer(
        txn_node.bootstrap, "txn-too-long", **{"transaction.timeout.ms": MAX_TIMEOUT_MS + 1}
    )
    with pytest.raises(KafkaException) as raised:
        p.init_transactions(30)
    assert raised.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_a_timed_out_transaction_is_aborted_by_the_coordinator(txn_node: RunningNode) -> None:
    from confluent_kafka import KafkaException

    bootstrap, topic = txn_node.bootstrap, "txn-timeout"
    clients.ck_create_topic(bootstrap, topic, 1)
    slow = _producer(
        bootstrap,
        "txn-timeout-id",
        **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000},
    )
    slow.init_transactions(30)
    slow.begin_transaction()
    for i in range(5):
        slow.produce(topic, value=b"slow%d" % i, partition=0)
    slow.flush(30)
    # The coordinator aborts it (markers written): read_committed reaches the end with
    # nothing, the log holds the 5 records and the abort marker.
    clients.wait_until(
        "the timed-out transaction's abort marker",
        lambda: clients.ck_watermarks(bootstrap, topic)[1] == 6,
        timeout=30,
    )
    assert _read(bootstrap, topic, 1, "read_committed") == []
    with pytest.raises(KafkaException):
        slow.commit_transaction(30)
    after = _producer(bootstrap, "txn-timeout-next")
    after.init_transactions(30)
    after.begin_transaction()
    after.produce(topic, value=b"after", partition=0)
    after.commit_transaction(30)
    assert _values(_read(bootstrap, topic, 1, "read_committed", until=1)) == [b"after"]


def test_aiokafka_commit_and_abort(txn_node: RunningNode) -> None:
    """aiokafka's transactional producer (its own protocol code, transaction version 1)."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    bootstrap, topic = txn_node.bootstrap, "txn-aio"
    clients.ck_create_topic(bootstrap, topic, 1)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="txn-aio-id")
        await p.start()
        try:
            async with p.transaction():
                for i in range(5):
                    await p.send(topic, b"kept%d" % i, partition=0)
            await p.begin_transaction()
            for i in range(5):  # acknowledged, so in the log before the abort
                await p.send_and_wait(topic, b"dropped%d" % i, partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send(topic, b"last", partition=0)
        finally:
            await p.stop()

    asyncio.run(run())
    assert _values(_read(bootstrap, topic, 1, "read_committed", until=6)) == sorted(
        [b"kept%d" % i for i in range(5)] + [b"last"]
    )
    assert len(_read(bootstrap, topic, 1, "read_uncommitted", until=11)) == 11


def test_kafka_python_commit_abort_and_offsets(txn_node: RunningNode) -> None:
    """kafka-python's transactional producer (its own protocol code): a commit with the
    input's offsets sent to the transaction, an abort, and a read_committed kafka-python
    consumer that sees only the committed records."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bootstrap, topic, group = txn_node.bootstrap, "txn-kp", "txn-kp-group"
    clients.ck_create_topic(bootstrap, topic, 1)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="txn-kp-id")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send(topic, b"kept%d" % i, partition=0)
        tp = TopicPartition(topic, 0)
        p.send_offsets_to_transaction({tp: OffsetAndMetadata(42, "", -1)}, group)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(5):
            p.send(topic, b"dropped%d" % i, partition=0).get(timeout=30)
        p.abort_transaction()
    finally:
        p.close()
    assert _values(_read(bootstrap, topic, 1, "read_committed", until=5)) == sorted(
        b"kept%d" % i for i in range(5)
    )
    assert _group_offsets(bootstrap, group, topic) == 42
    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    try:
        assert sorted(m.value for m in c) == sorted(b"kept%d" % i for i in range(5))
    finally:
        c.close()


# -- the protocol's edges, request by request ------------------------------------------


def test_raw_requests_answer_as_kafka(txn_node: RunningNode) -> None:
    """What a client cannot make librdkafka send: FindCoordinator v4 batched for
    transactional ids and a share group's key type; InitProducerId with an id but no
    epoch; a transactional batch without a transactional id; a client's control batch;
    AddPartitionsToTxn v5 batched, verify-only and not (the brokers' form: with no
    authorizer, CLUSTER_ACTION is everyone's)."""
    import datetime

    from crc32c import crc32c
    from kio.schema.add_partitions_to_txn.v5 import request as apt
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.schema.find_coordinator.v6.request import (
        FindCoordinatorRequest as FindCoordinatorV6,
    )
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.produce.v11 import request as produce

    from tests.kafka_raw import RawConnection
    from zonegate.records.batch import CRC_OFFSET, CRC_START
    from zonegate.records.build import build_batch
    from zonegate.transactions.states import shard_for

    bootstrap, topic, tid = txn_node.bootstrap, "txn-raw", "txn-raw-id"
    clients.ck_create_topic(bootstrap, topic, 1)
    conn = RawConnection(txn_node.port, timeout=30)
    found = conn.request(FindCoordinatorRequest(key_type=1, coordinator_keys=("a", "b")))
    assert [(c.key, c.error_code, c.node_id >= 0) for c in found.coordinators] == [
        ("a", 0, True),
        ("b", 0, True),
    ]
    # The coordinator named is a node of the client's zone (here: the node reached, its
    # zone's only one), whichever node owns the id's shard; it passes the calls on.
    for i in range(3):
        other_zone = RawConnection(txn_node.port + i, timeout=30)
        named = other_zone.request(FindCoordinatorRequest(key_type=1, coordinator_keys=(tid,)))
        other_zone.close()
        assert (named.coordinators[0].error_code, named.coordinators[0].node_id) == (0, i + 1)
    share = conn.request(FindCoordinatorV6(key_type=2, coordinator_keys=("g",)))
    assert share.coordinators[0].error_code == 42  # INVALID_REQUEST
    half = conn.request(
        InitProducerIdRequest(
            transactional_id="txn-raw-id",
            transaction_timeout=datetime.timedelta(seconds=30),
            producer_id=5,
            producer_epoch=-1,
        )
    )
    assert half.error_code == 42
    deadline = time.monotonic() + 20
    while True:  # as a client does while the coordinator's shard is being taken over
        init = conn.request(
            InitProducerIdRequest(
                transactional_id="txn-raw-id",
                transaction_timeout=datetime.timedelta(seconds=30),
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        if init.error_code not in (14, 15, 16) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch

    def send(tid: str | None, records: bytes) -> Any:
        answer = conn.request(
            produce.ProduceRequest(
                transactional_id=tid,
                acks=-1,
                timeout=datetime.timedelta(seconds=10),
                topic_data=(
                    produce.TopicProduceData(
                        name=topic,
                        partition_data=(produce.PartitionProduceData(index=0, records=records),),
                    ),
                ),
            )
        )
        return answer.responses[0].partition_responses[0]

    txn_batch = build_batch(
        [(b"k", b"v", (), 1_700_000_000_000)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    assert send(None, txn_batch).error_code == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Not added to the transaction: KIP-890's verification refuses it; Produce v11 knows
    # TRANSACTION_ABORTABLE (older versions are answered INVALID_TXN_STATE).
    assert send("txn-raw-id", txn_batch).error_code == 120
    control = bytearray(build_batch([(b"k", b"v", (), 1_700_000_000_000)]))
    control[22] |= 0x20  # the attributes' control bit
    struct.pack_into(">I", control, CRC_OFFSET, crc32c(bytes(control[CRC_START:])))
    refused = send(None, bytes(control))
    assert (refused.error_code, refused.error_message) == (
        87,
        f"Clients are not allowed to write control records in topic partition {topic}-0",
    )

    # An id never initialized, of the same coordinator shard (taken over by now).
    other = next(
        f"txn-raw-{i}" for i in range(1000) if shard_for(f"txn-raw-{i}", 50) == shard_for(tid, 50)
    )

    def add(verify_only: bool) -> Any:
        return conn.request(
            apt.AddPartitionsToTxnRequest(
                transactions=tuple(
                    apt.AddPartitionsToTxnTransaction(
                        transactional_id=tid,
                        producer_id=pid,
                        producer_epoch=epoch,
                        verify_only=verify_only,
                        topics=(apt.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
                    )
                    for tid in (tid, other)
                )
            )
        )

    def errors(answer: Any) -> list[tuple[str, int]]:
        return [
            (r.transactional_id, r.topic_results[0].results_by_partition[0].partition_error_code)
            for r in answer.results_by_transaction
        ]

    # Verify-only: not in the transaction (TRANSACTION_ABORTABLE, as Kafka 4's
    # coordinator), and an unknown id's INVALID_PRODUCER_ID_MAPPING.
    assert errors(add(True)) == [(tid, 120), (other, 49)]
    assert errors(add(False)) == [(tid, 0), (other, 49)]
    assert errors(add(True)) == [(tid, 0), (other, 49)]
    accepted = send("txn-raw-id", txn_batch)
    assert (accepted.error_code, accepted.base_offset) == (0, 0)
    conn.close()
