"""The write path: validate, stage in the WAL, wait for the upload, have the leader commit.

Every batch is checked (magic 2, CRC32C, lengths, record count, the topic's
max.message.bytes) before anything is staged; a bad batch fails only its
partition. Batches are stored as received; a compressed one is decompressed
only to read what the topic asks of its records: CreateTime timestamps, and the
keys a compacted topic requires. The answer
comes when the WAL object holding the batches is in the object store and each
partition's leader has committed their index entries: "durable and indexed".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch, AppendResult
from zonegate.metastore.api import ProducerIds
from zonegate.metastore.models import TopicInfo
from zonegate.records.batch import BatchHeader, CorruptBatch, validate_batches
from zonegate.records.rewrite import (
    CODEC_IDS,
    CREATE_TIME,
    LOG_APPEND_TIME,
    keyless_records,
    recompress,
    record_times,
    stamp,
)
from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.runtime.histogram import Histogram
from zonegate.services.api import ProducedPartition, ProducePartition
from zonegate.storage.cleaner import is_compacted
from zonegate.storage.index import UnknownStream
from zonegate.wal_s3.wal_writer import WalEntryLocation

log = logging.getLogger(__name__)


class Wal(Protocol):
    def append(self, stream_id: int, data: bytes) -> asyncio.Future[WalEntryLocation]: ...


class Appender(Protocol):
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]: ...

    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]: ...


@dataclass(slots=True)
class _Batch:
    """A batch as it is stored: its bytes (rewritten when the topic asks), its header,
    and the max timestamp its records carry."""

    data: bytes
    header: BatchHeader
    max_timestamp: int


@dataclass(slots=True)
class _Work:
    answer: ProducedPartition
    stream_id: int = -1
    batches: list[_Batch] | None = None
    staged: list[asyncio.Future[WalEntryLocation]] | None = None
    first: AppendResult | None = None


class ProduceService:
    def __init__(
        self,
        topics: Callable[[str], TopicInfo | None],
        config: Callable[[TopicInfo, str], str],
        wal: Wal,
        leaders: Appender,
        producer_ids: ProducerIds,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._topics = topics
        self._config = config
        self._clock = clock
        self._wal = wal
        self._leaders = leaders
        self._producer_ids = producer_ids
        self.leader_commit = Histogram()  # seconds from the Append to the leaders' answer

    async def allocate_producer_id(self) -> int:
        return await self._producer_ids.allocate_producer_id()

    async def delete_records(
        self, topic: str, partition: int, offset: int
    ) -> tuple[ErrorCode, int]:
        info = self._topics(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return ErrorCode.unknown_topic_or_partition, -1
        try:
            return await self._leaders.delete_records(info.partitions[partition].stream_id, offset)
        except UnknownStream:
            return ErrorCode.unknown_topic_or_partition, -1
        except LeaderUnavailable:
            return ErrorCode.not_leader_or_follower, -1

    def _check(self, work: _Work, records: bytes | None, client: str) -> None:
        a = work.answer
        topic = self._topics(a.topic)
        if topic is None or not 0 <= a.partition < len(topic.partitions):
            a.error = ErrorCode.unknown_topic_or_partition
            return
        if not records:
            a.error, a.message = ErrorCode.corrupt_message, "no record data"
            return
        max_bytes = int(self._config(topic, "max.message.bytes"))
        times: list[tuple[int, int] | None] = []
        try:
            headers = validate_batches(records, times)
            for h in headers:
                if h.size > max_bytes:
                    a.error = ErrorCode.message_too_large
                    a.message = f"batch of {h.size} bytes exceeds max.message.bytes={max_bytes}"
                    return
                if h.is_transactional or h.is_control:
                    a.error = ErrorCode.invalid_record
                    a.message = "transactional batches are not supported"
                    return
            batches = self._as_stored(topic, records, headers, times, max_bytes, a)
        except CorruptBatch as exc:
            a.error, a.message = ErrorCode.corrupt_message, str(exc)
            log.info("produce to %s-%d from %s rejected: %s", a.topic, a.partition, client, exc)
            return
        if batches is None:
            return  # a record out of the timestamp window: `a` says which
        work.stream_id = topic.partitions[a.partition].stream_id
        work.batches = batches

    def _as_stored(
        self,
        topic: TopicInfo,
        records: bytes,
        headers: list[BatchHeader],
        times: list[tuple[int, int] | None],
        max_bytes: int,
        a: ProducedPartition,
    ) -> list[_Batch] | None:
        """The batches as they will be stored (docs/storage.md, "Timestamps"): stamped
        for LogAppendTime, their max timestamp read from their records for CreateTime
        (and the header set to it), records outside the topic's timestamp window
        refused, recompressed for a topic's codec. Raises CorruptBatch."""
        config = self._config
        log_append = config(topic, "message.timestamp.type") == "LogAppendTime"
        codec = config(topic, "compression.type")
        now = self._clock.wall_ms()
        before = int(config(topic, "message.timestamp.before.max.ms"))
        after = int(config(topic, "message.timestamp.after.max.ms"))
        out: list[_Batch] = []
        pos = 0
        compacted = is_compacted(config(topic, "cleanup.policy"))
        for h, span in zip(headers, times, strict=True):
            data = records[pos : pos + h.size]
            pos += h.size
            if compacted and (keyless := keyless_records(h, data, max_bytes)):
                window = None if log_append else (now, before, after)
                self._refuse_keyless(h, data, max_bytes, keyless, window, a)
                return None
            if log_append:
                stamped = bytearray(data)
                stamp(stamped, LOG_APPEND_TIME, now)
                data, max_ts = bytes(stamped), now
                a.log_append_time = now
            else:
                if span is None:  # compressed: its records must be read
                    ts = record_times(h, data, max_bytes)
                    span = (min(ts), max(ts))
                lo, max_ts = span
                if lo < now - before or max_ts > now + after:
                    self._refuse_timestamps(h, data, max_bytes, now, before, after, len(out), a)
                    return None
                if max_ts != h.max_timestamp or h.timestamp_type != CREATE_TIME:
                    stamped = bytearray(data)
                    stamp(stamped, CREATE_TIME, max_ts)
                    data = bytes(stamped)
            if codec != "producer" and CODEC_IDS[codec] != h.compression:
                data = recompress(h, data, CODEC_IDS[codec], max_bytes)
            out.append(_Batch(data, h, max_ts))
        return out

    @staticmethod
    def _refuse_keyless(
        h: BatchHeader,
        data: bytes,
        max_bytes: int,
        keyless: list[int],
        window: tuple[int, int, int] | None,
        a: ProducedPartition,
    ) -> None:
        """INVALID_RECORD naming each record without a key (KIP-467), as Kafka's
        LogValidator answers a batch for a compacted topic (validateKey, then
        processRecordErrors); a keyed record of the batch outside the timestamp window
        (CreateTime: `window` is (now, before, after)) is named too, and then the error
        is INVALID_TIMESTAMP, as there."""
        message = (
            "Compacted topic cannot accept message without key in topic partition "
            f"{a.topic}-{a.partition}"
        )
        errors = {i: message for i in keyless}
        if window is not None:
            now, before, after = window
            for i, t in enumerate(record_times(h, data, max_bytes)):
                if i not in errors and not now - before <= t <= now + after:
                    errors[i] = (
                        f"Timestamp {t} of message with offset {i} is out of range. The "
                        f"timestamp should be within [{now - before}, {now + after}]"
                    )
        listed = tuple(sorted(errors.items()))
        a.record_errors = listed
        if len(errors) > len(keyless):
            a.error = ErrorCode.invalid_timestamp
            a.message = "One or more records have been rejected due to invalid timestamp"
            return
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in listed[:3])
        a.error = ErrorCode.invalid_record
        a.message = (
            f"One or more records have been rejected due to {len(listed)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]"
        )

    @staticmethod
    def _refuse_timestamps(
        h: BatchHeader,
        data: bytes,
        max_bytes: int,
        now: int,
        before: int,
        after: int,
        batch_index: int,
        a: ProducedPartition,
    ) -> None:
        """INVALID_TIMESTAMP naming each record outside the window (KIP-467), as Kafka's
        broker answers a batch with records older than message.timestamp.before.max.ms or
        newer than message.timestamp.after.max.ms."""
        errors = []
        limits: set[str] = set()
        for i, t in enumerate(record_times(h, data, max_bytes)):
            if t < now - before:
                limits.add(f"message.timestamp.before.max.ms={before}")
                errors.append((i, f"timestamp {t} of record {i} is more than {before} ms old"))
            elif t > now + after:
                limits.add(f"message.timestamp.after.max.ms={after}")
                errors.append(
                    (i, f"timestamp {t} of record {i} is more than {after} ms in the future")
                )
        a.error = ErrorCode.invalid_timestamp
        a.message = (
            f"batch {batch_index}: {len(errors)} record(s) have timestamps outside the "
            f"topic's window ({', '.join(sorted(limits))}); the node's time is {now}"
        )
        a.record_errors = tuple(errors)

    async def produce(
        self, partitions: Sequence[ProducePartition], *, client: str
    ) -> list[ProducedPartition]:
        works: list[_Work] = []
        # Validate and stage every partition with no await in between: the WAL keeps
        # the order in which requests staged their batches, and the leader relies on it.
        for pp in partitions:
            work = _Work(ProducedPartition(pp.topic, pp.partition))
            works.append(work)
            self._check(work, pp.records, client)
            if work.batches is None:
                continue
            work.staged = [self._wal.append(work.stream_id, b.data) for b in work.batches]

        # The WAL resolves futures in seal order, so awaiting them in staging order
        # suspends about once (they mostly share one object), without gather's wrapper.
        locations: list[WalEntryLocation | BaseException] = []
        try:
            for w in works:
                for f in w.staged or ():
                    try:
                        locations.append(await f)
                    except Exception as exc:
                        locations.append(exc)
        except asyncio.CancelledError:
            # The client went away: no one will read the rest (as gather would do).
            for w in works:
                for f in w.staged or ():
                    f.cancel()
            raise
        appends: list[AppendBatch] = []
        owners: list[_Work] = []
        it = iter(locations)
        for w in works:
            if not w.staged or w.batches is None:
                continue
            locs = [next(it) for _ in w.staged]
            failed = next((x for x in locs if isinstance(x, BaseException)), None)
            if failed is not None:
                a = w.answer
                log.warning("WAL upload failed for %s-%d: %s", a.topic, a.partition, failed)
                a.error, a.message = ErrorCode.kafka_storage_error, str(failed)
                continue
            for b, loc in zip(w.batches, locs, strict=True):
                assert isinstance(loc, WalEntryLocation)
                h = b.header
                appends.append(
                    AppendBatch(
                        stream_id=w.stream_id,
                        leader_epoch=ANY_EPOCH,
                        object_key=loc.object_key,
                        position=loc.position,
                        length=loc.length,
                        record_count=h.record_count,
                        max_timestamp=b.max_timestamp,
                        producer_id=h.producer_id,
                        producer_epoch=h.producer_epoch,
                        base_sequence=h.base_sequence,
                    )
                )
                owners.append(w)
        if appends:
            started = time.perf_counter()
            try:
                results = await self._leaders.append(appends)
                # Produce latency's last stage: the leaders' answer (their group commit).
                self.leader_commit.observe(time.perf_counter() - started)
            except Exception as exc:
                # The appends may have been committed: not "not written" (directory.py).
                log.exception("leader append failed")
                results = [AppendResult(ErrorCode.request_timed_out)] * len(appends)
                for w in owners:
                    w.answer.message = str(exc)
            for w, r in zip(owners, results, strict=True):
                # A partition with several batches answers with its first batch's offset
                # and the first error, as Kafka does.
                if w.first is None:
                    w.first = r
                if r.error != ErrorCode.none and w.answer.error == ErrorCode.none:
                    w.answer.error = r.error
        for w in works:
            a, first = w.answer, w.first
            if a.error == ErrorCode.none and first is not None:
                a.base_offset, a.log_start_offset = first.base_offset, first.log_start_offset
        return [w.answer for w in works]
