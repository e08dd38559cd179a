"""Real clients read a partition whose older part was rewritten into stream objects (issue 15).

A node in the test's process, on the local store and on moto's S3 server;
confluent-kafka produces about 20 MiB to one
partition in small batches. The test then does by hand what the compactor
does: takes the partition's tail from its leader, reads its bytes with the
node's reader, builds stream objects (16 MiB and a bit, then the rest but the
last part, which stays in WAL objects), uploads them and swaps them in. Then
confluent-kafka, kafka-python and aiokafka read from offset 0 and from the
middle of a chunk, across both stream objects into the WAL tail: every record
once, in order, as produced; ListOffsets by timestamp and MAX_TIMESTAMP answer
as before the rewrite; and the cold read takes at most one GET per 8 MiB.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e import clients
from tests.e2e.conftest import InProcessFactory
from tests.e2e.records_fixture import SampleRecord
from tests.inprocess import InProcessNode
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server
from zonegate.broker.node import Node
from zonegate.records.batch import iter_batches
from zonegate.runtime.io_class import io_class
from zonegate.storage.index import IndexEntry
from zonegate.storage.stream_objects import build_stream_object, is_stream_key

pytestmark = pytest.mark.e2e

TOPIC = "history"
RECORDS = 20_000
MiB = 1 << 20
SPIKE = 17_200  # a record whose timestamp is the partition's largest, in the second object


def _records() -> list[SampleRecord]:
    base = int(time.time() * 1000) - 3_600_000
    return [
        SampleRecord(
            key=b"k%d" % i,
            value=(b"%08d" % i) * 125,
            headers=(),
            timestamp_ms=base + 10 * i + (300_000 if i == SPIKE else 0),
        )
        for i in range(RECORDS)
    ]


def _rewrite_into_stream_objects(node: InProcessNode) -> list[tuple[str, int]]:
    """The compactor's steps, by hand: the tail's first 16 MiB and a bit into one stream
    object, all but its last 2 MiB of the rest into another. (key, size) of each."""
    n: Node = node.nodes[0]
    topic = n.catalog.get(TOPIC)
    assert topic is not None
    sid = topic.partitions[0].stream_id
    segment_ms = n.catalog.rules(topic).segmenting.segment_ms

    async def rewrite() -> list[tuple[str, int]]:
        epoch, tail = await n.local_leader.changes.tail(sid)
        assert not any(is_stream_key(e.object_key) for e in tail)
        cuts: list[list[IndexEntry]] = [[]]
        size, rest = 0, sum(e.length for e in tail)
        for e in tail:
            if size >= 16 * MiB and len(cuts) == 1:
                cuts.append([])
            if rest <= 2 * MiB:
                break
            cuts[-1].append(e)
            size += e.length
            rest -= e.length
        made = []
        for entries in cuts:
            with io_class("compaction"):
                blobs = await n.reader.read(entries)
                obj = build_stream_object(
                    sid, epoch, list(zip(entries, blobs, strict=True)), segment_ms=segment_ms
                )
                await n.store.put(obj.key, obj.data)
            assert len(obj.entries) < len(entries) / 10  # chunks of many batches
            assert await n.local_leader.changes.swap(sid, epoch, entries, obj.entries)
            made.append((obj.key, len(obj.data)))
        return made

    made: list[tuple[str, int]] = node.call(rewrite())
    return made


def _chunk_middle(node: InProcessNode) -> int:
    """An offset inside a batch in the middle of the last chunk of the first stream object."""
    n: Node = node.nodes[0]
    topic = n.catalog.get(TOPIC)
    assert topic is not None
    sid = topic.partitions[0].stream_id

    async def find() -> int:
        res = await n.local_leader.read_index(sid, 0, 1 << 40)
        chunks = [e for e in res.entries if is_stream_key(e.object_key)]
        first_object = [e for e in chunks if e.object_key == chunks[0].object_key]
        chunk = first_object[-1]
        (blob,) = await n.reader.read([chunk])
        batches = [h for _, h in iter_batches(blob)]
        h = batches[len(batches) // 2]
        assert h.last_offset_delta > 1
        return h.base_offset + h.last_offset_delta // 2

    offset: int = node.call(find())
    return offset


def _check(got: list[clients.Consumed], recs: list[SampleRecord], start: int) -> None:
    assert [c.offset for c in got] == list(range(start, RECORDS))
    for c in got:
        r = recs[c.offset]
        assert (c.key, c.value, c.timestamp_ms) == (r.key, r.value, r.timestamp_ms)


def _catch_up_gets(node: InProcessNode) -> int:
    counts = node.nodes[0].store.by_class.get(("get", "catch_up_fetch"))
    return 0 if counts is None else counts.requests


def _first_at(recs: list[SampleRecord], ts: int) -> int:
    return next(i for i, r in enumerate(recs) if r.timestamp_ms >= ts)


def _offsets_for_times(bootstrap: str, stamps: list[int]) -> dict[str, list[int]]:
    """The offset each client's ListOffsets finds for each timestamp."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTp
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTp
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTp

    ck = Consumer({"bootstrap.servers": bootstrap, "group.id": "times"})
    try:
        ck_found = [
            ck.offsets_for_times([CkTp(TOPIC, 0, ts)], timeout=30)[0].offset for ts in stamps
        ]
    finally:
        ck.close()
    kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tp = KpTp(TOPIC, 0)
        kp_found = [kp.offsets_for_times({tp: ts})[tp].offset for ts in stamps]
    finally:
        kp.close()

    async def aio() -> list[int]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await c.start()
        try:
            tp = AioTp(TOPIC, 0)
            return [(await c.offsets_for_times({tp: ts}))[tp].offset for ts in stamps]
        finally:
            await c.stop()

    return {"confluent-kafka": ck_found, "kafka-python": kp_found, "aiokafka": asyncio.run(aio())}


def _max_timestamp(bootstrap: str) -> Any:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(TOPIC, 0)
    return admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(30)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3Server]:
    with MotoS3Server(default_bucket="zonegate-e2e") as server:
        yield server


@pytest.mark.parametrize("store", ["file", "s3"])
def test_clients_read_stream_objects_and_the_wal_tail(
    inprocess_factory: InProcessFactory,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    store: str,
) -> None:
    # The node's own compactor held off: the test rewrites the tail itself, as it would.
    args = ["--zones", "zone-a", "--stream-object-bytes", str(1 << 40)]
    args += ["--compaction-max-delay-ms", str(10**12)]
    if store == "s3":
        moto: MotoS3Server = request.getfixturevalue("moto")
        for name, value in FAKE_AWS_ENV.items():
            monkeypatch.setenv(name, value)
        args += ["--object-store", "s3://zonegate-e2e/streams", "--s3-endpoint", moto.endpoint_url]
    node = inprocess_factory(args)
    recs = _records()
    clients.ck_create_topic(node.bootstrap, TOPIC, 1)
    acked = clients.ck_produce(
        node.bootstrap, TOPIC, recs, 1, extra={"linger.ms": 20, "batch.size": 32_768}
    )
    assert acked == [(0, i) for i in range(RECORDS)]
    # In the first object, in the second before the spike, and after it.
    points = ((10, 0), (777, 3), (9_000, -4), (16_900, 0), (17_100, 3), (RECORDS - 5, 0))
    stamps = [recs[i].timestamp_ms + d for i, d in points]
    before = _offsets_for_times(node.bootstrap, stamps)

    made = _rewrite_into_stream_objects(node)
    streamed = sum(size for _, size in made)
    assert len(made) == 2 and made[0][1] >= 16 * MiB and streamed < RECORDS * 1100 - MiB
    second = [int(x) for x in made[1][0].split("/")[2].split("-")[:2]]
    assert second[0] < SPIKE <= second[1] and second[0] < 16_900  # as the stamps expect

    # The cold read (block cache empty; the WAL tail stays in the log cache).
    node.nodes[0].block_cache.clear()
    gets = _catch_up_gets(node)
    _check(clients.ck_consume(node.bootstrap, TOPIC, {0: RECORDS}), recs, 0)
    gets = _catch_up_gets(node) - gets
    assert 0 < gets <= math.ceil(streamed / (8 * MiB)), (gets, streamed / MiB)
    assert node.nodes[0].block_cache.hits > 0

    _check(clients.kp_consume(node.bootstrap, TOPIC, {0: RECORDS}), recs, 0)
    _check(clients.aio_consume(node.bootstrap, TOPIC, {0: RECORDS}), recs, 0)
    middle = _chunk_middle(node)
    for consume in (clients.ck_consume, clients.kp_consume, clients.aio_consume):
        _check(consume(node.bootstrap, TOPIC, {0: RECORDS - middle}, middle), recs, middle)

    expected = [_first_at(recs, ts) for ts in stamps]
    assert before == {c: expected for c in before}
    assert _offsets_for_times(node.bootstrap, stamps) == before
    top = _max_timestamp(node.bootstrap)
    assert (top.offset, top.timestamp) == (SPIKE, recs[SPIKE].timestamp_ms)
