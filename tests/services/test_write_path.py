"""ProduceService over in-memory fakes: a catalog, a WAL stage and a leader directory.

No WAL object, no network: what a producer is answered, and what reaches the WAL and
the leaders, for each way a produce can go.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch, AppendResult
from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.records.batch import validate_batches
from zonegate.records.build import build_batch
from zonegate.runtime.clock import ManualClock
from zonegate.services.api import ProducedPartition, ProducePartition
from zonegate.services.topic_configs import topic_rules

# LeaderUnavailable as the write path knows it, wherever the leader's contract keeps it.
from zonegate.services.write_path import LeaderUnavailable, ProduceService
from zonegate.storage.index import UnknownStream
from zonegate.storage.topic_rules import TopicRules
from zonegate.wal_s3.wal_writer import WalEntryLocation

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
T = TypeVar("T")


def _topic(name: str, partitions: int, first_stream: int, **configs: str) -> TopicInfo:
    tid = uuid.uuid4()
    parts = tuple(PartitionInfo(tid, name, p, first_stream + p, 1, 0) for p in range(partitions))
    return TopicInfo(tid, name, parts, dict(configs))


class FakeCatalog:
    def __init__(self, *topics: TopicInfo) -> None:
        self.topics = {t.name: t for t in topics}

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def rules(self, topic: TopicInfo) -> TopicRules:
        return topic_rules(topic.configs)


class FakeWal:
    """Stages entries one after another in one object; `fail` makes every upload fail."""

    def __init__(self) -> None:
        self.staged: list[tuple[int, bytes]] = []
        self.fail: Exception | None = None
        self.hold = False  # leave every upload pending
        self.futures: list[asyncio.Future[WalEntryLocation]] = []

    def append(self, stream_id: int, data: bytes) -> asyncio.Future[WalEntryLocation]:
        fut: asyncio.Future[WalEntryLocation] = asyncio.get_running_loop().create_future()
        position = sum(len(d) for _, d in self.staged)
        self.staged.append((stream_id, data))
        self.futures.append(fut)
        if self.hold:
            return fut
        if self.fail is not None:
            fut.set_exception(self.fail)
        else:
            fut.set_result(WalEntryLocation("wal/1", stream_id, position, len(data)))
        return fut


class FakeLeaders:
    """Hands out offsets per stream; `errors` answers a stream with an error instead."""

    def __init__(self) -> None:
        self.appended: list[AppendBatch] = []
        self.next_offset: dict[int, int] = {}
        self.errors: dict[int, ErrorCode] = {}
        self.fail: Exception | None = None
        self.deleted: list[tuple[int, int]] = []
        self.delete_fails: Exception | None = None

    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        if self.fail is not None:
            raise self.fail
        out = []
        for b in batches:
            self.appended.append(b)
            if b.stream_id in self.errors:
                out.append(AppendResult(self.errors[b.stream_id]))
                continue
            base = self.next_offset.get(b.stream_id, 0)
            self.next_offset[b.stream_id] = base + b.record_count
            out.append(AppendResult(ErrorCode.none, base, 0))
        return out

    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        if self.delete_fails is not None:
            raise self.delete_fails
        self.deleted.append((stream_id, offset))
        return ErrorCode.none, offset


class FakeProducerIds:
    def __init__(self) -> None:
        self.last = 999

    async def allocate_producer_id(self) -> int:
        self.last += 1
        return self.last


class Node:
    def __init__(self, *topics: TopicInfo) -> None:
        self.catalog = FakeCatalog(*topics)
        self.wal = FakeWal()
        self.leaders = FakeLeaders()
        self.clock = ManualClock(wall_ms=NOW)
        self.service = ProduceService(
            self.catalog,
            self.wal,
            self.leaders,
            FakeProducerIds(),
            self.clock,
        )

    def produce(self, *partitions: tuple[str, int, bytes | None]) -> list[ProducedPartition]:
        asks = [ProducePartition(t, p, r) for t, p, r in partitions]
        return run(self.service.produce(asks, client="test"))


def run(aw: Awaitable[T]) -> T:
    async def main() -> T:
        return await aw

    return asyncio.run(main())


def _batch(n: int = 1, ts: int = NOW, **kw: Any) -> bytes:
    return build_batch([(b"k%d" % i, b"v", (), ts) for i in range(n)], **kw)


def test_batches_are_staged_then_committed_and_answered_with_their_offsets() -> None:
    node = Node(_topic("a", 2, 10), _topic("b", 1, 20))
    first, second = _batch(2, producer_id=7, producer_epoch=1, base_sequence=5), _batch(3)
    answers = node.produce(("a", 1, first), ("b", 0, second), ("a", 1, _batch(1)))

    assert [(a.topic, a.partition, a.error, a.base_offset) for a in answers] == [
        ("a", 1, ErrorCode.none, 0),
        ("b", 0, ErrorCode.none, 0),
        ("a", 1, ErrorCode.none, 2),
    ]
    assert all(a.log_append_time == -1 and a.record_errors == () for a in answers)
    assert [sid for sid, _ in node.wal.staged] == [11, 20, 11]
    assert node.wal.staged[0][1] == first  # stored as received
    b = node.leaders.appended[0]
    assert b == AppendBatch(
        stream_id=11,
        leader_epoch=ANY_EPOCH,
        object_key="wal/1",
        position=0,
        length=len(first),
        record_count=2,
        max_timestamp=NOW,
        producer_id=7,
        producer_epoch=1,
        base_sequence=5,
    )
    assert node.leaders.appended[1].position == len(first)


def test_a_partition_with_several_batches_answers_with_its_first() -> None:
    node = Node(_topic("a", 1, 10))
    (answer,) = node.produce(("a", 0, _batch(2) + _batch(3)))
    assert (answer.error, answer.base_offset) == (ErrorCode.none, 0)
    assert [b.record_count for b in node.leaders.appended] == [2, 3]
    assert node.leaders.next_offset[10] == 5


def test_an_unknown_topic_or_partition_stages_nothing() -> None:
    node = Node(_topic("a", 1, 10))
    answers = node.produce(("nope", 0, _batch()), ("a", 1, _batch()), ("a", -1, _batch()))
    assert [a.error for a in answers] == [ErrorCode.unknown_topic_or_partition] * 3
    assert node.wal.staged == [] and node.leaders.appended == []


def test_a_refused_partition_fails_alone() -> None:
    node = Node(_topic("a", 2, 10))
    bad = bytearray(_batch())
    bad[-1] ^= 0xFF  # the CRC no longer holds
    answers = node.produce(("a", 0, bytes(bad)), ("a", 1, _batch()))
    assert answers[0].error == ErrorCode.corrupt_message
    assert answers[0].message is not None and "CRC32C" in answers[0].message
    assert answers[0].base_offset == -1
    assert (answers[1].error, answers[1].base_offset) == (ErrorCode.none, 0)
    assert [sid for sid, _ in node.wal.staged] == [11]


def test_a_failed_upload_is_a_storage_error_and_never_reaches_the_leader() -> None:
    node = Node(_topic("a", 1, 10))
    node.wal.fail = OSError("the object store is down")
    (answer,) = node.produce(("a", 0, _batch()))
    assert answer.error == ErrorCode.kafka_storage_error
    assert answer.message == "the object store is down"
    assert node.leaders.appended == []


def test_a_failed_leader_call_times_the_request_out() -> None:
    node = Node(_topic("a", 1, 10))
    node.leaders.fail = LeaderUnavailable("no route")
    (answer,) = node.produce(("a", 0, _batch()))
    assert (answer.error, answer.message, answer.base_offset) == (
        ErrorCode.request_timed_out,
        "no route",
        -1,
    )


def test_a_log_append_time_topic_is_stamped_with_the_nodes_time() -> None:
    node = Node(_topic("a", 1, 10, **{"message.timestamp.type": "LogAppendTime"}))
    (answer,) = node.produce(("a", 0, _batch(2, ts=NOW - 5_000)))
    assert (answer.error, answer.log_append_time) == (ErrorCode.none, NOW)
    (h,) = validate_batches(node.wal.staged[0][1])
    assert (h.timestamp_type, h.max_timestamp) == (1, NOW)
    assert node.leaders.appended[0].max_timestamp == NOW


def test_an_error_answer_carries_no_log_append_time() -> None:
    """As Kafka's PartitionResponse(error): -1, whatever the topic's timestamp type."""
    node = Node(_topic("a", 2, 10, **{"message.timestamp.type": "LogAppendTime"}))
    node.leaders.errors[10] = ErrorCode.not_leader_or_follower
    answers = node.produce(("a", 0, _batch()), ("a", 1, _batch()))
    assert (answers[0].error, answers[0].log_append_time) == (
        ErrorCode.not_leader_or_follower,
        -1,
    )
    assert (answers[1].error, answers[1].log_append_time) == (ErrorCode.none, NOW)

    node.wal.fail = OSError("down")
    (failed,) = node.produce(("a", 1, _batch()))
    assert (failed.error, failed.log_append_time) == (ErrorCode.kafka_storage_error, -1)


def test_delete_records_asks_the_partitions_leader() -> None:
    node = Node(_topic("a", 2, 10))
    delete: Callable[[str, int, int], Awaitable[tuple[ErrorCode, int]]]
    delete = node.service.delete_records
    assert run(delete("a", 1, 42)) == (ErrorCode.none, 42)
    assert node.leaders.deleted == [(11, 42)]
    assert run(delete("a", 2, 1)) == (ErrorCode.unknown_topic_or_partition, -1)
    assert run(delete("nope", 0, 1)) == (ErrorCode.unknown_topic_or_partition, -1)
    node.leaders.delete_fails = UnknownStream(11)
    assert run(delete("a", 1, 1)) == (ErrorCode.unknown_topic_or_partition, -1)
    node.leaders.delete_fails = LeaderUnavailable("gone")
    assert run(delete("a", 1, 1)) == (ErrorCode.not_leader_or_follower, -1)


def test_producer_ids_come_from_the_store() -> None:
    node = Node()
    assert run(node.service.allocate_producer_id()) == 1000


def test_the_topics_rules_from_the_catalog_apply() -> None:
    node = Node(_topic("c", 1, 10, **{"cleanup.policy": "compact"}))
    keyless = build_batch([(None, b"v", (), NOW)])
    (answer,) = node.produce(("c", 0, keyless))
    assert answer.error == ErrorCode.invalid_record
    assert answer.record_errors == (
        (0, "Compacted topic cannot accept message without key in topic partition c-0"),
    )
    assert node.wal.staged == []


def test_the_window_is_the_clocks() -> None:
    node = Node(_topic("w", 1, 10, **{"message.timestamp.after.max.ms": "1000"}))
    ahead = _batch(ts=NOW + 5_000)
    (answer,) = node.produce(("w", 0, ahead))
    assert answer.error == ErrorCode.invalid_timestamp
    assert answer.record_errors == (
        (0, f"timestamp {NOW + 5_000} of record 0 is more than 1000 ms in the future"),
    )
    run(node.clock.advance(4.0))
    (answer,) = node.produce(("w", 0, ahead))
    assert (answer.error, answer.base_offset) == (ErrorCode.none, 0)


def test_a_client_gone_cancels_the_uploads_it_waited_for() -> None:
    node = Node(_topic("a", 2, 10))
    node.wal.hold = True

    async def main() -> None:
        asks = [ProducePartition("a", p, _batch()) for p in (0, 1)]
        task = asyncio.create_task(node.service.produce(asks, client="test"))
        await asyncio.sleep(0)  # staged, waiting for the first upload
        assert len(node.wal.futures) == 2
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert all(f.cancelled() for f in node.wal.futures)
    assert node.leaders.appended == []
