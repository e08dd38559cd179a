"""Kafka's timestamps with real clients (issue 14): LogAppendTime stamped by the broker,
CreateTime indexed by what the records carry (a batch header saying -1 included), and
message.timestamp.before/after.max.ms enforced with INVALID_TIMESTAMP.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from crc32c import crc32c

from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode
from tests.kafka_raw import produce_one
from zonegate.records.build import build_batch

pytestmark = pytest.mark.e2e

HOUR = 3_600_000


def _create(node: InProcessNode, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, config=configs)])[topic].result(30)


def _consume(node: InProcessNode, topic: str, n: int) -> list[Any]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"ts-{time.monotonic_ns()}"})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
    c.close()
    return got


def _produce_ck(node: InProcessNode, topic: str, stamps: list[int]) -> list[Any]:
    """Produces one record per timestamp; returns the delivery reports (errors or not)."""
    from confluent_kafka import Producer

    reports: list[Any] = []
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0, "retries": 0})
    for i, ts in enumerate(stamps):
        p.produce(
            topic,
            value=b"r%d" % i,
            timestamp=ts,
            on_delivery=lambda err, msg: reports.append((err, msg)),
        )
        p.flush(30)
    return reports


def test_log_append_time_is_the_brokers(inprocess_factory: InProcessFactory) -> None:
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    node = inprocess_factory(["--zones", "zone-a"])
    _create(node, "lat", {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    reports = _produce_ck(node, "lat", [1_000, 2_000, 3_000])  # the producer's: ignored
    after = int(time.time() * 1000)
    assert [err for err, _ in reports] == [None, None, None]
    # The produce answer carries the append time (librdkafka shows it on the report).
    for _, msg in reports:
        kind, ts = msg.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after
    got = _consume(node, "lat", 3)
    assert [m.value() for m in got] == [b"r0", b"r1", b"r2"]
    for m in got:
        kind, ts = m.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after
    # kafka-python checks the batch CRC the broker recomputed, and sees the same times.
    from kafka import KafkaConsumer, TopicPartition

    kc = KafkaConsumer(bootstrap_servers=node.bootstrap, check_crcs=True)
    tp = TopicPartition("lat", 0)
    kc.assign([tp])
    kc.seek(tp, 0)
    polled = kc.poll(timeout_ms=10_000, max_records=3)
    recs = polled.get(tp, [])
    kc.close()
    assert len(recs) == 3
    assert all(r.timestamp_type == 1 and before <= r.timestamp <= after for r in recs)
    # A time lookup uses the append time too: from before the produce, offset 0.
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "lat-times"})
    assert c.offsets_for_times([CTP("lat", 0, before - 1)], timeout=10)[0].offset == 0
    assert c.offsets_for_times([CTP("lat", 0, 5_000)], timeout=10)[0].offset == 0
    assert c.offsets_for_times([CTP("lat", 0, after + 60_000)], timeout=10)[0].offset == -1
    c.close()


def _with_header_max_timestamp(batch: bytes, max_ts: int) -> bytes:
    """The batch with its header's max timestamp replaced and its CRC made right again."""
    b = bytearray(batch)
    b[35:43] = max_ts.to_bytes(8, "big", signed=True)
    b[17:21] = crc32c(bytes(b[21:])).to_bytes(4, "big")
    return bytes(b)


@pytest.mark.parametrize("codec", [0, 1, 4], ids=["none", "gzip", "zstd"])
def test_a_header_max_timestamp_of_minus_one_is_not_trusted(
    inprocess_factory: InProcessFactory, codec: int
) -> None:
    """Some clients leave the batch header's max timestamp at -1: the node reads the
    records' own times, so lookups by time and MAX_TIMESTAMP find them."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    node = inprocess_factory(["--zones", "zone-a"])
    _create(node, "hdr", {})
    base = int(time.time() * 1000) - 50_000
    # Records 0-9 a second apart, except record 6, the newest.
    stamps = [base + 1000 * i for i in range(10)]
    stamps[6] = base + 30_000
    batch = build_batch(
        [(None, b"v%d" % i, (), ts) for i, ts in enumerate(stamps)], compression=codec
    )
    answer = produce_one(node.port, "hdr", _with_header_max_timestamp(batch, -1))
    assert int(answer.error_code) == 0
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "hdr"})
    found = c.offsets_for_times([TopicPartition("hdr", 0, base + 2_500)], timeout=10)
    assert found[0].offset == 3
    found = c.offsets_for_times([TopicPartition("hdr", 0, base + 20_000)], timeout=10)
    assert found[0].offset == 6
    found = c.offsets_for_times([TopicPartition("hdr", 0, base + 31_000)], timeout=10)
    assert found[0].offset == -1
    c.close()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    tp = TopicPartition("hdr", 0)
    answer = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(30)
    assert (answer.offset, answer.timestamp) == (6, base + 30_000)
    # Served with the true max timestamp, CRC made right: kafka-python checks it.
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    kc = KafkaConsumer(bootstrap_servers=node.bootstrap, check_crcs=True)
    kc.assign([KTP("hdr", 0)])
    kc.seek(KTP("hdr", 0), 0)
    recs = kc.poll(timeout_ms=10_000, max_records=10).get(KTP("hdr", 0), [])
    kc.close()
    assert [r.timestamp for r in recs] == stamps


def test_timestamps_outside_the_window_are_refused(inprocess_factory: InProcessFactory) -> None:
    from confluent_kafka import KafkaError

    node = inprocess_factory(["--zones", "zone-a"])
    _create(
        node,
        "window",
        {"message.timestamp.before.max.ms": str(HOUR), "message.timestamp.after.max.ms": "60000"},
    )
    now = int(time.time() * 1000)
    reports = _produce_ck(node, "window", [now - 2 * HOUR, now, now + HOUR, now - HOUR + 60_000])
    errors = [None if err is None else err.code() for err, _ in reports]
    assert errors == [KafkaError.INVALID_TIMESTAMP, None, KafkaError.INVALID_TIMESTAMP, None]
    got = _consume(node, "window", 2)
    assert [m.value() for m in got] == [b"r1", b"r3"], "refused records were not stored"
    # The raw answer names the record and the reason (KIP-467 record errors).
    batch = build_batch([(None, b"a", (), now), (None, b"b", (), now + 2 * HOUR)])
    part = produce_one(node.port, "window", batch)
    assert int(part.error_code) == 32  # INVALID_TIMESTAMP
    assert [int(e.batch_index) for e in part.record_errors] == [1]
    assert "message.timestamp.after.max.ms" in (part.error_message or "")
    # Without the configs (Kafka's defaults: no window) the same old record is taken.
    _create(node, "no-window", {})
    assert [e for e, _ in _produce_ck(node, "no-window", [now - 2 * HOUR])] == [None]
