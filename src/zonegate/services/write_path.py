"""The write path: validate, stage in the WAL, wait for the upload, have the leader commit.

Every batch is checked (magic 2, CRC32C, lengths, record count, the topic's
max.message.bytes) before anything is staged; a bad batch fails only its
partition. Batches are stored as received, never decompressed. The answer
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

from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch, AppendResult
from zonegate.metastore.api import ProducerIds
from zonegate.metastore.models import TopicInfo
from zonegate.records.batch import BatchHeader, CorruptBatch, validate_batches
from zonegate.runtime.histogram import Histogram
from zonegate.services.api import ProducedPartition, ProducePartition
from zonegate.services.topic_configs import effective
from zonegate.wal_s3.wal_writer import WalEntryLocation

log = logging.getLogger(__name__)


class Wal(Protocol):
    def append(self, stream_id: int, data: bytes) -> asyncio.Future[WalEntryLocation]: ...


class Appender(Protocol):
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]: ...


@dataclass(slots=True)
class _Work:
    answer: ProducedPartition
    stream_id: int = -1
    headers: list[BatchHeader] | None = None
    staged: list[asyncio.Future[WalEntryLocation]] | None = None
    first: AppendResult | None = None


class ProduceService:
    def __init__(
        self,
        topics: Callable[[str], TopicInfo | None],
        wal: Wal,
        leaders: Appender,
        producer_ids: ProducerIds,
    ) -> None:
        self._topics = topics
        self._wal = wal
        self._leaders = leaders
        self._producer_ids = producer_ids
        self.leader_commit = Histogram()  # seconds from the Append to the leaders' answer

    async def allocate_producer_id(self) -> int:
        return await self._producer_ids.allocate_producer_id()

    def _check(self, work: _Work, records: bytes | None, client: str) -> None:
        a = work.answer
        topic = self._topics(a.topic)
        if topic is None or not 0 <= a.partition < len(topic.partitions):
            a.error = ErrorCode.unknown_topic_or_partition
            return
        if not records:
            a.error, a.message = ErrorCode.corrupt_message, "no record data"
            return
        max_bytes = int(effective(topic.configs, "max.message.bytes"))
        try:
            headers = validate_batches(records)
        except CorruptBatch as exc:
            a.error, a.message = ErrorCode.corrupt_message, str(exc)
            log.info("produce to %s-%d from %s rejected: %s", a.topic, a.partition, client, exc)
            return
        for h in headers:
            if h.size > max_bytes:
                a.error = ErrorCode.message_too_large
                a.message = f"batch of {h.size} bytes exceeds max.message.bytes={max_bytes}"
                return
            if h.is_transactional or h.is_control:
                a.error = ErrorCode.invalid_record
                a.message = "transactional batches are not supported"
                return
        work.stream_id = topic.partitions[a.partition].stream_id
        work.headers = headers

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
            if work.headers is None:
                continue
            records = pp.records
            assert records is not None
            staged = []
            pos = 0
            for h in work.headers:
                staged.append(self._wal.append(work.stream_id, records[pos : pos + h.size]))
                pos += h.size
            work.staged = staged

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
            if not w.staged or w.headers is None:
                continue
            locs = [next(it) for _ in w.staged]
            failed = next((x for x in locs if isinstance(x, BaseException)), None)
            if failed is not None:
                a = w.answer
                log.warning("WAL upload failed for %s-%d: %s", a.topic, a.partition, failed)
                a.error, a.message = ErrorCode.kafka_storage_error, str(failed)
                continue
            for h, loc in zip(w.headers, locs, strict=True):
                assert isinstance(loc, WalEntryLocation)
                appends.append(
                    AppendBatch(
                        stream_id=w.stream_id,
                        leader_epoch=ANY_EPOCH,
                        object_key=loc.object_key,
                        position=loc.position,
                        length=loc.length,
                        record_count=h.record_count,
                        max_timestamp=h.max_timestamp,
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
                log.exception("leader append failed")
                results = [AppendResult(ErrorCode.kafka_storage_error)] * len(appends)
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
