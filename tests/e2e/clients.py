"""Produce and consume with each real client, returning what the client saw.

Each function produces `SampleRecord`s to explicit partitions and returns the
(partition, offset) the client was told, or consumes partitions from offset 0
(or `start`) and returns the records as the client decoded them.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from tests.e2e.records_fixture import SampleRecord


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


# -- confluent-kafka (librdkafka) ---------------------------------------------
def ck_create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(30)


def ck_produce(
    bootstrap: str,
    topic: str,
    recs: list[SampleRecord],
    partitions: int,
    codec: str = "none",
    extra: dict[str, object] | None = None,
) -> list[tuple[int, int]]:
    from confluent_kafka import Producer

    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
    }
    conf.update(extra or {})
    producer = Producer(conf)
    results: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def report(i: int):  # type: ignore[no-untyped-def]
        def cb(err, msg):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(str(err))
            else:
                results[i] = (msg.partition(), msg.offset())

        return cb

    for i, r in enumerate(recs):
        producer.produce(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers) or None,
            timestamp=r.timestamp_ms,
            partition=i % partitions,
            on_delivery=report(i),
        )
        producer.poll(0)
    assert producer.flush(60) == 0, "messages left undelivered"
    assert not errors, errors
    return [results[i] for i in range(len(recs))]


def ck_consume(
    bootstrap: str, topic: str, counts: dict[int, int], start: int = 0
) -> list[Consumed]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "zonegate-test-unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, start) for p in counts])
    out: list[Consumed] = []
    got: dict[int, int] = defaultdict(int)
    deadline = time.monotonic() + 60
    while any(got[p] < n for p, n in counts.items()) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got[msg.partition()] += 1
        out.append(
            Consumed(
                msg.partition(),
                msg.offset(),
                msg.key(),
                msg.value(),
                tuple(msg.headers() or ()),
                msg.timestamp()[1],
            )
        )
    consumer.close()
    return out


# -- kafka-python ---------------------------------------------------------------
def kp_produce(
    bootstrap: str, topic: str, recs: list[SampleRecord], partitions: int, codec: str = "none"
) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    futures = [
        producer.send(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers),
            timestamp_ms=r.timestamp_ms,
            partition=i % partitions,
        )
        for i, r in enumerate(recs)
    ]
    producer.flush(60)
    out = []
    for f in futures:
        md = f.get(30)
        out.append((md.partition, md.offset))
    producer.close()
    return out


def kp_consume(
    bootstrap: str, topic: str, counts: dict[int, int], start: int = 0
) -> list[Consumed]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.assign([TopicPartition(topic, p) for p in counts])
    if start:
        for p in counts:
            consumer.seek(TopicPartition(topic, p), start)
    else:
        consumer.seek_to_beginning()
    out: list[Consumed] = []
    got: dict[int, int] = defaultdict(int)
    deadline = time.monotonic() + 60
    while any(got[p] < n for p, n in counts.items()) and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=500).items():
            for m in msgs:
                got[tp.partition] += 1
                out.append(
                    Consumed(
                        tp.partition, m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp
                    )
                )
    consumer.close()
    return out


# -- aiokafka -----------------------------------------------------------------
def aio_produce(
    bootstrap: str, topic: str, recs: list[SampleRecord], partitions: int, codec: str = "none"
) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[tuple[int, int]]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
        )
        await producer.start()
        try:
            futs = [
                await producer.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers),
                    timestamp_ms=r.timestamp_ms,
                    partition=i % partitions,
                )
                for i, r in enumerate(recs)
            ]
            mds = await asyncio.gather(*futs)
            return [(md.partition, md.offset) for md in mds]
        finally:
            await producer.stop()

    return asyncio.run(run())


def aio_consume(
    bootstrap: str, topic: str, counts: dict[int, int], start: int = 0
) -> list[Consumed]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Consumed]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in counts])
            if start:
                for p in counts:
                    consumer.seek(TopicPartition(topic, p), start)
            else:
                await consumer.seek_to_beginning()
            out: list[Consumed] = []
            got: dict[int, int] = defaultdict(int)
            deadline = time.monotonic() + 60
            while any(got[p] < n for p, n in counts.items()) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, msgs in batches.items():
                    for m in msgs:
                        got[tp.partition] += 1
                        out.append(
                            Consumed(
                                tp.partition,
                                m.offset,
                                m.key,
                                m.value,
                                tuple(m.headers or ()),
                                m.timestamp,
                            )
                        )
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


# -- kcat -----------------------------------------------------------------------
def kcat(*args: str, input: bytes | None = None, timeout: float = 60) -> bytes:
    proc = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def ck_read_to_end(
    bootstrap: str, topic: str, timeout: float = 30
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of partition 0 from offset 0 to its end, read
    by a fresh confluent-kafka consumer (the end: librdkafka's partition EOF)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"all-{time.monotonic_ns()}",
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return out
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    raise AssertionError(f"no end of partition within {timeout:.0f} s")


def ck_watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log start, high watermark) of a partition, as confluent-kafka reads them."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low), int(high)
    finally:
        c.close()


def wait_until(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    """Polls `check` every 0.2 s until it holds; AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def ck_read_values(
    bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 60
) -> list[bytes]:
    """The values of partitions 0..`partitions`-1 from offset 0, read by a fresh
    confluent-kafka consumer until `count` records came or `timeout` passed."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(seen) < count and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            seen.append(m.value())
    consumer.close()
    return seen
