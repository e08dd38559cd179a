"""The read service over in-memory fakes: Fetch (long polls on a manual clock, byte
limits, offsets and epochs patched), ListOffsets and OffsetForLeaderEpoch, and how a
partition its leader cannot serve is answered. No network, no sleeps."""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode

from tests.storage.fakes import MemoryStore, spin
from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.messages import AppendBatch, AppendResult, ReadIndexResult
from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.records.batch import iter_batches
from zonegate.records.build import build_batch
from zonegate.records.decode import decode_records
from zonegate.runtime.clock import ManualClock
from zonegate.runtime.io_class import current_io_class
from zonegate.services.api import FetchedPartition, FetchPartition
from zonegate.services.read_path import EARLIEST, LATEST, MAX_TIMESTAMP, ReadService
from zonegate.services.topic_configs import topic_rules
from zonegate.storage.index import IndexEntry, StreamIndex, UnknownStream
from zonegate.storage.log_cache import LogCache
from zonegate.storage.objects import TransientObjectStoreError
from zonegate.storage.reader import StreamReader
from zonegate.storage.topic_rules import TopicRules

pytestmark = pytest.mark.unit
T = TypeVar("T")
TOPIC = "events"
MINUTE_MS = 60_000


def _topic(name: str, first_stream: int, partitions: int, epoch: int = 0) -> TopicInfo:
    tid = uuid.uuid4()
    return TopicInfo(
        tid,
        name,
        tuple(PartitionInfo(tid, name, i, first_stream + i, 1, epoch) for i in range(partitions)),
    )


class FakeCatalog:
    """Topics this node knows, and `elsewhere` ones only a lookup finds (made by another
    node since this one last looked)."""

    def __init__(self, *topics: TopicInfo, elsewhere: Sequence[TopicInfo] = ()) -> None:
        self.known = {t.name: t for t in topics}
        self.elsewhere = {t.name: t for t in elsewhere}

    def get(self, name: str) -> TopicInfo | None:
        return self.known.get(name)

    async def lookup(self, name: str) -> TopicInfo | None:
        if name not in self.known and name in self.elsewhere:
            self.known[name] = self.elsewhere.pop(name)
        return self.known.get(name)

    def rules(self, topic: TopicInfo) -> TopicRules:
        return topic_rules(topic.configs)


class _Partition:
    def __init__(self, epoch: int) -> None:
        self.index = StreamIndex()
        self.high_watermark = 0
        self.log_start = 0
        self.epoch = epoch
        self.changed: asyncio.Future[None] | None = None


class FakeLeader:
    """Leads partitions in memory: each published batch is written into a WAL object of
    the store behind another partition's bytes, and indexed at the next offsets, as the
    write path and the leader leave them."""

    def __init__(self, store: MemoryStore, clock: ManualClock) -> None:
        self._store = store
        self._clock = clock
        self._partitions: dict[int, _Partition] = {}
        self._objects = 0
        self.out_of_reach: set[int] = set()

    def lead(self, stream_id: int, epoch: int = 0) -> None:
        self._partitions[stream_id] = _Partition(epoch)

    def drop(self, stream_id: int) -> None:
        """The partition's topic was deleted."""
        del self._partitions[stream_id]

    def publish(
        self,
        stream_id: int,
        values: Sequence[bytes],
        timestamps: Sequence[int],
        compression: int = 0,
    ) -> None:
        p = self._partitions[stream_id]
        # As a producer sends it: base offset 0, no partition leader epoch.
        blob = build_batch(
            [(None, v, (), ts) for v, ts in zip(values, timestamps, strict=True)],
            compression=compression,
        )
        key = f"wal/{self._objects:06d}"
        self._objects += 1
        other = b"\xee" * 37
        self._store.objects[key] = other + blob + other
        first = p.high_watermark
        p.index.extend(
            [
                IndexEntry(
                    first,
                    first + len(values) - 1,
                    key,
                    len(other),
                    len(blob),
                    max(timestamps),
                    self._clock.wall_ms(),
                )
            ]
        )
        p.high_watermark += len(values)
        if p.changed is not None and not p.changed.done():
            p.changed.set_result(None)

    def _partition(self, stream_id: int) -> _Partition:
        if stream_id in self.out_of_reach:
            raise LeaderUnavailable(f"leader of stream {stream_id}: UNAVAILABLE")
        p = self._partitions.get(stream_id)
        if p is None:
            raise UnknownStream(stream_id)
        return p

    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        raise AssertionError("the read path never appends")

    async def read_index(self, stream_id: int, offset: int, max_bytes: int) -> ReadIndexResult:
        p = self._partition(stream_id)
        hwm, start = p.high_watermark, p.log_start
        if offset < start or offset > hwm:
            return ReadIndexResult(ErrorCode.offset_out_of_range, (), hwm, start, p.epoch)
        entries = p.index.from_offset(offset, max_bytes) if offset < hwm else []
        return ReadIndexResult(ErrorCode.none, tuple(entries), hwm, start, p.epoch)

    async def offsets(self, stream_id: int) -> tuple[int, int, int]:
        p = self._partition(stream_id)
        return p.log_start, p.high_watermark, p.epoch

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]:
        return self._partition(stream_id).index.from_timestamp(timestamp)

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None:
        return self._partition(stream_id).index.max_timestamp_entry()

    async def changed(self, stream_id: int) -> asyncio.Future[None]:
        p = self._partition(stream_id)
        if p.changed is None or p.changed.done():
            p.changed = asyncio.get_running_loop().create_future()
        return p.changed

    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        raise AssertionError("the read path never deletes records")

    def move_log_start(self, stream_id: int, offset: int) -> None:
        p = self._partitions[stream_id]
        p.index.drop_before(offset)
        p.log_start = offset


class FakeEpochs:
    def __init__(self, ends: dict[tuple[int, int], tuple[int, int]] | None = None) -> None:
        self.ends = ends or {}

    async def epoch_end_offset(self, stream_id: int, epoch: int) -> tuple[int, int] | None:
        return self.ends.get((stream_id, epoch))


class ClassedStore(MemoryStore):
    """Remembers the I/O class each ranged GET was made in."""

    def __init__(self) -> None:
        super().__init__()
        self.get_classes: builtins.list[str] = []

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        self.get_classes.append(current_io_class())
        return await super().get_range(key, start, length)


class FailingStore(ClassedStore):
    """Fails every ranged GET of the keys in `failing` as the object store does once
    its retries are spent."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        if key in self.failing:
            raise TransientObjectStoreError(f"S3 connection failed on {key!r}")
        return await super().get_range(key, start, length)


class Rig:
    def __init__(self, *topics: TopicInfo, elsewhere: Sequence[TopicInfo] = ()) -> None:
        self.clock = ManualClock()
        self.store = FailingStore()
        self.catalog = FakeCatalog(*topics, elsewhere=elsewhere)
        self.leader = FakeLeader(self.store, self.clock)
        self.epochs = FakeEpochs()
        for t in [*topics, *elsewhere]:
            for p in t.partitions:
                self.leader.lead(p.stream_id, p.leader_epoch)
        self.reads = ReadService(
            self.catalog,
            self.leader,
            StreamReader(self.store, LogCache(0)),
            self.epochs,
            self.clock,
        )

    async def fetch(
        self,
        *partitions: tuple[str, int, int],
        max_bytes: int = 1 << 20,
        partition_max_bytes: int = 1 << 20,
        min_bytes: int = 1,
        max_wait_s: float = 0.0,
    ) -> list[FetchedPartition]:
        return await self.reads.fetch(
            [FetchPartition(t, p, o, partition_max_bytes) for t, p, o in partitions],
            max_bytes=max_bytes,
            min_bytes=min_bytes,
            max_wait_s=max_wait_s,
        )


def run(body: Coroutine[Any, Any, T]) -> T:
    # Only a guard against a hang: nothing here waits on real time.
    async def bounded() -> T:
        return await asyncio.wait_for(body, 10)

    return asyncio.run(bounded())


def _values(records: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in decode_records(records)]


def _epochs(records: bytes) -> set[int]:
    return {h.partition_leader_epoch for _, h in iter_batches(records)}


# -- fetch ---------------------------------------------------------------------
def test_fetch_answers_the_stored_batches_at_their_offsets_and_the_leaders_epoch() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 2, epoch=4))
        for i in range(3):
            rig.leader.publish(10, [b"a%d" % i, b"b%d" % i], [1000 + i, 1001 + i])
        (answer,) = await rig.fetch((TOPIC, 0, 0))
        assert answer.error == ErrorCode.none
        assert (answer.high_watermark, answer.log_start_offset, answer.leader_epoch) == (6, 0, 4)
        assert _values(answer.records) == [
            (0, b"a0"),
            (1, b"b0"),
            (2, b"a1"),
            (3, b"b1"),
            (4, b"a2"),
            (5, b"b2"),
        ]
        assert _epochs(answer.records) == {4}
        # From the middle: the batch holding the offset on (Kafka leaves the cut to the
        # client), and nothing at the high watermark.
        (answer,) = await rig.fetch((TOPIC, 0, 3))
        assert [o for o, _ in _values(answer.records)] == [2, 3, 4, 5]
        (answer,) = await rig.fetch((TOPIC, 0, 6))
        assert (answer.error, answer.records, answer.high_watermark) == (ErrorCode.none, b"", 6)
        (answer,) = await rig.fetch((TOPIC, 0, 7))
        assert answer.error == ErrorCode.offset_out_of_range

    run(body())


def test_fetch_of_an_unknown_topic_or_partition_answers_that_partition_only() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 1))
        rig.leader.publish(10, [b"x"], [1000])
        answers = await rig.fetch(("nope", 0, 0), (TOPIC, 5, 0), (TOPIC, 0, 0))
        assert [a.error for a in answers] == [
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.none,
        ]
        assert _values(answers[2].records) == [(0, b"x")]

    run(body())


def test_the_first_batch_of_an_answer_is_whole_and_later_ones_keep_the_limits() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 2))
        for sid in (10, 11):
            for i in range(3):
                rig.leader.publish(sid, [b"v" * 100], [1000 + i])
        batch = len(build_batch([(None, b"v" * 100, (), 1000)]))
        # Each partition may take less than one batch, the answer one and a half: the
        # first partition's first batch comes whole; the second partition gets nothing,
        # but its high watermark.
        first, second = await rig.fetch(
            (TOPIC, 0, 0), (TOPIC, 1, 0), max_bytes=batch * 3 // 2, partition_max_bytes=10
        )
        assert [o for o, _ in _values(first.records)] == [0]
        assert (second.error, second.records, second.high_watermark) == (ErrorCode.none, b"", 3)
        # Within the limits, whole batches up to them.
        (answer,) = await rig.fetch((TOPIC, 0, 0), partition_max_bytes=2 * batch + 1)
        assert [o for o, _ in _values(answer.records)] == [0, 1]

    run(body())


def test_a_long_poll_wakes_when_its_leader_indexes_data_not_when_time_passes() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 1))
        poll = asyncio.ensure_future(rig.fetch((TOPIC, 0, 0), max_wait_s=5.0))
        await spin()
        assert not poll.done()
        started = rig.clock.monotonic()
        rig.leader.publish(10, [b"late"], [1000])
        await spin()
        assert poll.done(), "the leader's change wakes the poll"
        assert rig.clock.monotonic() == started
        (answer,) = poll.result()
        assert _values(answer.records) == [(0, b"late")]
        assert answer.high_watermark == 1

    run(body())


def test_a_long_poll_answers_empty_when_its_wait_is_over() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 1))
        rig.leader.publish(10, [b"old"], [1000])
        poll = asyncio.ensure_future(rig.fetch((TOPIC, 0, 1), max_wait_s=0.5))
        await spin()
        await rig.clock.advance(0.499)
        assert not poll.done()
        await rig.clock.advance(0.001)
        await spin()
        assert poll.done()
        (answer,) = poll.result()
        assert (answer.error, answer.records, answer.high_watermark) == (ErrorCode.none, b"", 1)

    run(body())


def test_a_long_poll_waits_until_min_bytes_are_there() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 1))
        batch = len(build_batch([(None, b"v" * 100, (), 1000)]))
        poll = asyncio.ensure_future(rig.fetch((TOPIC, 0, 0), min_bytes=batch + 1, max_wait_s=30.0))
        await spin()
        rig.leader.publish(10, [b"v" * 100], [1000])
        await spin()
        assert not poll.done(), "one batch is less than min_bytes"
        await rig.clock.advance(10.0)
        rig.leader.publish(10, [b"w" * 100], [1001])
        await spin()
        assert poll.done()
        (answer,) = poll.result()
        assert _values(answer.records) == [(0, b"v" * 100), (1, b"w" * 100)]

    run(body())


def test_a_partition_its_leader_cannot_serve_is_answered_at_once() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 3))
        rig.leader.publish(12, [b"fine"], [1000])
        rig.leader.out_of_reach.add(10)
        rig.leader.drop(11)
        # No wait for the long poll: the client should refresh its metadata now.
        gone, deleted, fine = await rig.fetch((TOPIC, 0, 0), (TOPIC, 1, 0), (TOPIC, 2, 0))
        assert gone.error == ErrorCode.not_leader_or_follower
        assert deleted.error == ErrorCode.unknown_topic_or_partition
        assert (fine.error, _values(fine.records)) == (ErrorCode.none, [(0, b"fine")])

    run(body())


def test_a_partition_the_object_store_fails_to_read_answers_a_storage_error() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 2))
        rig.leader.publish(10, [b"lost"], [1000])
        rig.leader.publish(11, [b"fine"], [1000])
        rig.store.failing.add("wal/000000")
        # A long poll is not held: the failed partition is answered at once, and the
        # request's other partition as usual.
        failed, fine = await rig.fetch((TOPIC, 0, 0), (TOPIC, 1, 0), max_wait_s=30)
        assert (failed.error, failed.records) == (ErrorCode.kafka_storage_error, b"")
        assert (fine.error, _values(fine.records)) == (ErrorCode.none, [(0, b"fine")])
        offset = await rig.reads.list_offset(TOPIC, 0, 1000, max_timestamp_allowed=True)
        assert offset.error == ErrorCode.kafka_storage_error
        # Once the store answers again, so does the partition.
        rig.store.failing.clear()
        (again,) = await rig.fetch((TOPIC, 0, 0))
        assert (again.error, _values(again.records)) == (ErrorCode.none, [(0, b"lost")])

    run(body())


def test_recent_data_is_read_as_a_tail_fetch_and_older_data_as_catch_up() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 1))
        rig.leader.publish(10, [b"old"], [1000])
        await rig.clock.advance(2 * MINUTE_MS / 1000)
        rig.leader.publish(10, [b"new"], [1001])
        await rig.fetch((TOPIC, 0, 1))
        await rig.fetch((TOPIC, 0, 0), partition_max_bytes=1)
        assert rig.store.get_classes == ["tail_fetch", "catch_up_fetch"]

    run(body())


# -- offsets -------------------------------------------------------------------
def test_list_offsets_by_time_finds_the_exact_record_inside_a_batch() -> None:
    async def body() -> None:
        rig = Rig(elsewhere=[_topic(TOPIC, 10, 1, epoch=2)])
        rig.leader.publish(10, [b"a", b"b", b"c"], [1000, 1010, 1020])
        rig.leader.publish(10, [b"d", b"e"], [1030, 1015])

        async def at(ts: int, allowed: bool = True) -> tuple[ErrorCode, int, int, int]:
            a = await rig.reads.list_offset(TOPIC, 0, ts, max_timestamp_allowed=allowed)
            return a.error, a.timestamp, a.offset, a.leader_epoch

        # The topic was made on another node: a lookup finds it.
        assert await at(1005) == (ErrorCode.none, 1010, 1, 2)
        assert await at(1020) == (ErrorCode.none, 1020, 2, 2)
        assert await at(1021) == (ErrorCode.none, 1030, 3, 2)
        # After the newest record's time: no offset and, as Kafka answers, no epoch.
        assert await at(1031) == (ErrorCode.none, -1, -1, -1)
        assert await at(LATEST) == (ErrorCode.none, -1, 5, 2)
        assert await at(EARLIEST) == (ErrorCode.none, -1, 0, 2)
        assert await at(MAX_TIMESTAMP) == (ErrorCode.none, 1030, 3, 2)
        assert (await at(MAX_TIMESTAMP, allowed=False))[0] == ErrorCode.unsupported_version
        rig.leader.move_log_start(10, 3)
        assert await at(EARLIEST) == (ErrorCode.none, -1, 3, 2)
        assert await at(1000) == (ErrorCode.none, 1030, 3, 2)
        missing = await rig.reads.list_offset("nope", 0, LATEST, max_timestamp_allowed=True)
        assert missing.error == ErrorCode.unknown_topic_or_partition
        rig.leader.out_of_reach.add(10)
        assert (await at(LATEST))[0] == ErrorCode.not_leader_or_follower

    run(body())


def test_list_offsets_by_time_reads_within_the_topics_max_message_bytes_in_force() -> None:
    """The read path reads the limit from the topic's parsed rules at each lookup: a
    compressed batch whose body passes a lowered max.message.bytes (and 16 times its
    compressed size) cannot be read, and the lookup, not the node, fails."""

    async def body() -> None:
        topic = _topic(TOPIC, 10, 1)
        rig = Rig(topic)
        rig.leader.publish(10, [b"\0" * 100_000], [1000], compression=1)  # gzip
        answer = await rig.reads.list_offset(TOPIC, 0, 1000, max_timestamp_allowed=True)
        assert (answer.error, answer.offset) == (ErrorCode.none, 0)
        rig.catalog.known[TOPIC] = dataclasses.replace(
            topic, configs={"max.message.bytes": "50000"}
        )
        answer = await rig.reads.list_offset(TOPIC, 0, 1000, max_timestamp_allowed=True)
        assert answer.error == ErrorCode.corrupt_message

    run(body())


def test_legacy_offsets_list_the_log_end_then_its_start() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 1))
        rig.leader.publish(10, [b"a", b"b"], [1000, 1001])
        answer = await rig.reads.legacy_offsets(TOPIC, 0, LATEST, 10)
        assert (answer.error, answer.offsets) == (ErrorCode.none, (2, 0))
        answer = await rig.reads.legacy_offsets(TOPIC, 0, EARLIEST, 10)
        assert (answer.error, answer.offsets) == (ErrorCode.none, (0,))

    run(body())


def test_epoch_end_answers_from_the_leader_and_the_epoch_history() -> None:
    async def body() -> None:
        rig = Rig(_topic(TOPIC, 10, 1, epoch=3))
        for i in range(7):
            rig.leader.publish(10, [b"x"], [1000 + i])
        rig.epochs.ends[(10, 1)] = (1, 4)

        async def end(current: int, epoch: int) -> tuple[ErrorCode, int, int]:
            a = await rig.reads.epoch_end(TOPIC, 0, current, epoch)
            return a.error, a.leader_epoch, a.offset

        assert await end(3, 3) == (ErrorCode.none, 3, 7)  # the current epoch: the log end
        assert await end(-1, 1) == (ErrorCode.none, 1, 4)
        assert await end(3, 2) == (ErrorCode.none, 2, 7)  # no record of it: nothing truncated
        assert await end(3, 5) == (ErrorCode.none, -1, -1)
        # The client's view of the leader is older, or newer, than the leader's.
        assert (await end(2, 1))[0] == ErrorCode.fenced_leader_epoch
        assert (await end(4, 1))[0] == ErrorCode.unknown_leader_epoch

    run(body())
