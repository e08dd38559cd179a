"""Batches written by real clients' code pass validation and decode exactly; and back.

kafka-python's record builders are the producer's own code, run without a
network. librdkafka's bytes come from its mock cluster (see the last test).
"""

from __future__ import annotations

import datetime

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecordsBuilder

from zonegate.records.batch import HEADER_SIZE, UnsupportedMagic, validate_batches
from zonegate.records.build import build_batch
from zonegate.records.codecs import XERIAL_MAGIC
from zonegate.records.decode import Record, decode_records

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _specs(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    # Values large enough that the body passes 32 KiB: kafka-python's xerial
    # snappy then writes several blocks.
    return [
        (
            None if i % 7 == 0 else b"key-%d" % i,
            None if i % 11 == 0 else (b"value-%d-" % i) * (i % 50 + 1),
            [("seq", str(i).encode()), ("zone", b"a")] if i % 3 else [],
            1_700_000_000_000 + (i * 37) % 1000,  # not monotonic, as clocks go
        )
        for i in range(n)
    ]


def _expected(
    specs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]], base_offset: int
) -> list[Record]:
    return [Record(base_offset + i, ts, k, v, tuple(h)) for i, (k, v, h, ts) in enumerate(specs)]


@pytest.mark.unit
@pytest.mark.parametrize("codec", list(CODECS))
def test_kafka_python_batch_builder(codec: str) -> None:
    specs = _specs(300)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 22,
    )
    for i, (k, v, hs, ts) in enumerate(specs):
        assert builder.append(i, timestamp=ts, key=k, value=v, headers=hs) is not None
    data = bytes(builder.build())
    (h,) = validate_batches(data)
    assert (h.compression, h.record_count, h.size) == (CODECS[codec], 300, len(data))
    assert h.max_timestamp == max(ts for *_, ts in specs)
    if codec == "snappy":
        # kafka-python writes snappy-java's xerial framing, not raw snappy.
        assert data[HEADER_SIZE:].startswith(XERIAL_MAGIC)
    assert decode_records(data) == _expected(specs, 0)


@pytest.mark.unit
@pytest.mark.parametrize("codec", list(CODECS))
def test_kafka_python_memory_records_idempotent(codec: str) -> None:
    specs = _specs(40)
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=CODECS[codec],
        batch_size=1 << 22,
        producer_id=42,
        producer_epoch=3,
        base_sequence=1000,
    )
    for k, v, hs, ts in specs:
        assert builder.append(timestamp=ts, key=k, value=v, headers=hs) is not None
    builder.close()
    data = bytes(builder.buffer())
    (h,) = validate_batches(data)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 1000)
    assert decode_records(data) == _expected(specs, 0)


@pytest.mark.unit
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_legacy_message_sets_are_refused_by_magic(magic: int) -> None:
    builder = MemoryRecordsBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=None if magic == 0 else 5, key=b"k", value=b"v")
    builder.close()
    data = bytes(builder.buffer())
    assert len(data) < HEADER_SIZE  # shorter than any v2 header, yet the magic is named
    with pytest.raises(UnsupportedMagic, match=f"has magic {magic}; only magic 2"):
        validate_batches(data)


@pytest.mark.unit
@pytest.mark.parametrize("codec", list(CODECS))
def test_kafka_python_reads_what_build_batch_writes(codec: str) -> None:
    specs = _specs(120)
    data = build_batch(
        specs,
        base_offset=9,
        compression=CODECS[codec],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(9 + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(specs)]


def _fetch_from_mock(port: int, topic: str) -> bytes:
    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.types import BrokerId, TopicName
    from kio.static.primitive import i8, i32, i32Timedelta, i64

    from tests.kafka_raw import RawConnection

    conn = RawConnection(port)
    try:
        req = FetchRequest(
            replica_id=BrokerId(-1),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
            min_bytes=i32(1),
            max_bytes=i32(1 << 24),
            isolation_level=i8(0),
            topics=(
                FetchTopic(
                    topic=TopicName(topic),
                    partitions=(
                        FetchPartition(
                            partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1 << 24)
                        ),
                    ),
                ),
            ),
        )
        records: bytes = conn.request(req).responses[0].partitions[0].records
        return records
    finally:
        conn.close()


@pytest.mark.integration
@pytest.mark.parametrize("codec", list(CODECS))
def test_librdkafka_batches(codec: str) -> None:
    """confluent-kafka produces into librdkafka's mock cluster, which keeps the batches as
    the producer wrote them; a raw Fetch gives those bytes back."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    specs = _specs(200)
    producer = confluent_kafka.Producer(
        {
            "test.mock.num.brokers": 1,
            "compression.type": codec,
            "linger.ms": 20,
            "enable.idempotence": True,
            "log_level": 2,
        }
    )
    for k, v, hs, ts in specs:
        producer.produce("t", key=k, value=v, headers=hs, timestamp=ts, partition=0)
    assert producer.flush(10) == 0
    (broker,) = producer.list_topics("t", timeout=5).brokers.values()
    data = _fetch_from_mock(broker.port, "t")
    headers = validate_batches(data)
    assert headers and all(h.compression == CODECS[codec] for h in headers)
    assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)
    if codec == "snappy":
        # librdkafka writes raw snappy: the body opens with the uncompressed length.
        assert not any(data[p + HEADER_SIZE :].startswith(XERIAL_MAGIC) for p in _positions(data))
    # librdkafka sends an empty header list as none at all, and null values as such.
    assert decode_records(data) == _expected(specs, 0)


def _positions(data: bytes) -> list[int]:
    from zonegate.records.batch import iter_batches

    return [p for p, _ in iter_batches(data)]
