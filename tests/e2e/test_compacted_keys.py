"""A record without a key produced to a compacted topic fails its batch with INVALID_RECORD
and a record error per key-less record (KIP-467), as Kafka 3.x answers it; real clients
see the error, nothing of the batch is stored, and other topics take key-less records."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode
from tests.kafka_raw import produce_one
from zonegate.records.build import build_batch

pytestmark = pytest.mark.e2e

INVALID_RECORD = 87


def _create(node: InProcessNode, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, config=configs)])[topic].result(30)


def _values(node: InProcessNode, topic: str, n: int) -> list[bytes | None]:
    """The values of partition 0 to its end (at most `n`; up to 10 s)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": f"k-{time.monotonic_ns()}",
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes | None] = []
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error() is not None:
            if m.error().code() == KafkaError._PARTITION_EOF:
                break
            continue
        got.append(m.value())
    c.close()
    return got


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_gets_invalid_record_for_the_whole_batch(
    inprocess_factory: InProcessFactory, compression: str
) -> None:
    from confluent_kafka import KafkaError, Producer

    node = inprocess_factory(["--zones", "zone-a"])
    _create(node, "compacted", {"cleanup.policy": "compact"})
    reports: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "compression.type": compression,
            "linger.ms": 200,  # the three records go in one batch
            "retries": 0,
        }
    )
    on = {"on_delivery": lambda err, msg: reports.append(err)}
    p.produce("compacted", key=b"a", value=b"1", **on)
    p.produce("compacted", value=b"no key", **on)
    p.produce("compacted", key=b"b", value=b"2", **on)
    p.flush(30)
    # The batch fails whole, its keyed records too, as Kafka fails it.
    assert [e.code() if e else None for e in reports] == [KafkaError.INVALID_RECORD] * 3
    p.produce("compacted", key=b"c", value=b"3", **on)
    p.flush(30)
    assert reports[-1] is None
    assert _values(node, "compacted", 2) == [b"3"], "nothing of the refused batch is stored"


def test_kafka_python_gets_invalid_record(inprocess_factory: InProcessFactory) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    node = inprocess_factory(["--zones", "zone-a"])
    _create(node, "cd", {"cleanup.policy": "compact,delete"})
    p = KafkaProducer(bootstrap_servers=node.bootstrap, retries=0, compression_type="gzip")
    try:
        with pytest.raises(InvalidRecordError):
            p.send("cd", value=b"no key").get(timeout=30)
        assert p.send("cd", key=b"k", value=b"v").get(timeout=30).offset == 0
    finally:
        p.close()


@pytest.mark.parametrize("codec", [0, 1, 3], ids=["none", "gzip", "lz4"])
def test_the_raw_answer_names_each_keyless_record(
    inprocess_factory: InProcessFactory, codec: int
) -> None:
    node = inprocess_factory(["--zones", "zone-a"])
    _create(node, "raw", {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    batch = build_batch(
        [(b"k", b"1", (), now), (None, b"2", (), now), (None, b"3", (), now)], compression=codec
    )
    part = produce_one(node.port, "raw", batch)
    assert int(part.error_code) == INVALID_RECORD
    assert int(part.base_offset) == -1
    message = "Compacted topic cannot accept message without key in topic partition raw-0"
    assert [(int(e.batch_index), e.batch_index_error_message) for e in part.record_errors] == [
        (1, message),
        (2, message),
    ]
    assert part.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        "showing the first three errors at most: ["
        f"RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=2, message='{message}')]"
    )
    # A topic that is not compacted takes the same batch.
    _create(node, "plain", {})
    assert int(produce_one(node.port, "plain", batch).error_code) == 0


def test_a_keyless_record_with_a_keyed_one_out_of_the_window_is_invalid_timestamp(
    inprocess_factory: InProcessFactory,
) -> None:
    """Kafka checks each record's key, then its timestamp; any timestamp error makes the
    batch's error INVALID_TIMESTAMP, both records named."""
    node = inprocess_factory(["--zones", "zone-a"])
    _create(node, "both", {"cleanup.policy": "compact", "message.timestamp.after.max.ms": "1000"})
    now = int(time.time() * 1000)
    batch = build_batch([(None, b"1", (), now), (b"k", b"2", (), now + 3_600_000)])
    part = produce_one(node.port, "both", batch)
    assert int(part.error_code) == 32  # INVALID_TIMESTAMP
    assert [int(e.batch_index) for e in part.record_errors] == [0, 1]
    assert "without key" in (part.record_errors[0].batch_index_error_message or "")
