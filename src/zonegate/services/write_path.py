"""The write path: validate, stage in the WAL, wait for the upload, have the leader commit.

Each partition's records are checked and made ready to store by the record
validator (services/log_validator.py) before anything is staged; a refused
partition fails alone. The answer comes when the WAL object holding the batches
is in the object store and each partition's leader has committed their index
entries: "durable and indexed".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.kafka_errors import OUTCOME_UNKNOWN
from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch, AppendResult
from zonegate.metastore.api import ProducerIds
from zonegate.metastore.models import TopicInfo
from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.runtime.histogram import Histogram
from zonegate.services.api import ProducedPartition, ProducePartition
from zonegate.services.log_validator import Refused, StoredBatch, validate
from zonegate.storage.index import UnknownStream
from zonegate.storage.topic_rules import TopicRules
from zonegate.wal_s3.wal_writer import WalEntryLocation

log = logging.getLogger(__name__)


class ProduceCatalog(Protocol):
    """What the write path asks of the node's catalog (services/catalog.py)."""

    def get(self, name: str) -> TopicInfo | None:
        """The topic as cached now, without waiting on the metadata store."""
        ...

    def rules(self, topic: TopicInfo) -> TopicRules:
        """The topic's rules, parsed when its configs or the defaults last changed."""
        ...


class Wal(Protocol):
    def append(self, stream_id: int, data: bytes) -> asyncio.Future[WalEntryLocation]: ...


class Appender(Protocol):
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]: ...

    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]: ...


@dataclass(slots=True)
class _Work:
    """One partition of a produce request on its way: its answer, and its batches once
    accepted, staged and committed."""

    answer: ProducedPartition
    stream_id: int = -1
    batches: tuple[StoredBatch, ...] = ()
    staged: list[asyncio.Future[WalEntryLocation]] | None = None
    first: AppendResult | None = None


class ProduceService:
    def __init__(
        self,
        catalog: ProduceCatalog,
        wal: Wal,
        leaders: Appender,
        producer_ids: ProducerIds,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._catalog = catalog
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
        info = self._catalog.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return ErrorCode.unknown_topic_or_partition, -1
        try:
            return await self._leaders.delete_records(info.partitions[partition].stream_id, offset)
        except UnknownStream:
            return ErrorCode.unknown_topic_or_partition, -1
        except LeaderUnavailable:
            return ErrorCode.not_leader_or_follower, -1

    async def produce(
        self,
        partitions: Sequence[ProducePartition],
        *,
        client: str,
        transactional_id: str | None = None,
        produce_version: int = -1,
    ) -> list[ProducedPartition]:
        # Validate and stage every partition with no await in between: the WAL keeps
        # the order in which requests staged their batches, and the leader relies on it.
        works = [self._validate(pp, client) for pp in partitions]
        for w in works:
            if w.batches:
                w.staged = [self._wal.append(w.stream_id, b.data) for b in w.batches]
        locations = await self._uploads(works)
        await self._forward(works, locations, transactional_id or "", produce_version)
        for w in works:
            a, first = w.answer, w.first
            if a.error == ErrorCode.none and first is not None:
                a.base_offset, a.log_start_offset = first.base_offset, first.log_start_offset
            elif a.error != ErrorCode.none:
                a.log_append_time = -1  # as Kafka's PartitionResponse(error)
        return [w.answer for w in works]

    def _validate(self, pp: ProducePartition, client: str) -> _Work:
        """The partition's work, with its batches as they will be stored, or its answer
        carrying the refusal."""
        a = ProducedPartition(pp.topic, pp.partition)
        work = _Work(a)
        topic = self._catalog.get(a.topic)
        if topic is None or not 0 <= a.partition < len(topic.partitions):
            a.error = ErrorCode.unknown_topic_or_partition
            return work
        outcome = validate(
            pp.records,
            self._catalog.rules(topic).produce,
            self._clock.wall_ms(),
            topic_partition=f"{a.topic}-{a.partition}",
        )
        if isinstance(outcome, Refused):
            a.error, a.message = outcome.error, outcome.message
            a.record_errors = outcome.record_errors
            if outcome.error == ErrorCode.corrupt_message:
                log.info(
                    "produce to %s-%d from %s rejected: %s",
                    a.topic,
                    a.partition,
                    client,
                    outcome.message,
                )
            return work
        a.log_append_time = outcome.log_append_time
        work.stream_id = topic.partitions[a.partition].stream_id
        work.batches = outcome.batches
        return work

    async def _uploads(self, works: list[_Work]) -> list[WalEntryLocation | BaseException]:
        """Where each staged batch landed in the object store, or why it did not, in
        staging order."""
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
        return locations

    async def _forward(
        self,
        works: list[_Work],
        locations: list[WalEntryLocation | BaseException],
        transactional_id: str,
        produce_version: int,
    ) -> None:
        """Has the leaders commit each uploaded batch; a partition whose upload failed
        is answered KAFKA_STORAGE_ERROR and never reaches its leader. A transactional
        batch carries the request's transactional id and version: its leader verifies
        it with the coordinator (KIP-890; leader_forwarder/txn_verify.py)."""
        appends: list[AppendBatch] = []
        owners: list[_Work] = []
        it = iter(locations)
        for w in works:
            if not w.staged:
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
                        transactional=h.is_transactional,
                        transactional_id=transactional_id if h.is_transactional else "",
                        produce_version=produce_version if h.is_transactional else -1,
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
                results = [AppendResult(OUTCOME_UNKNOWN)] * len(appends)
                for w in owners:
                    w.answer.message = str(exc)
            for w, r in zip(owners, results, strict=True):
                # A partition with several batches answers with its first batch's offset
                # and the first error, as Kafka does.
                if w.first is None:
                    w.first = r
                if r.error != ErrorCode.none and w.answer.error == ErrorCode.none:
                    w.answer.error = r.error
