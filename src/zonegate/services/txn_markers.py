"""Transaction markers written as data: the coordinator node's `MarkerWriter`
(txn_coordinator/shard_host.py) over its own WAL and the partitions' leaders.

A marker is a control batch (transactions/markers.py, Kafka's bytes). The node that
coordinates the transaction stages one per partition in its WAL writer (they share the
object being filled, with any produce data of the moment), waits for the upload, then
sends each partition's leader the batch summary with the control fields
(leader_forwarder/messages.py), exactly as produce does below the record validator:
clients can never write control batches, this path is the only one that does. The
leader assigns the marker its offset and checks it against the partition's
transaction rules (leader_forwarder/sequencer.py), so markers are indexed, read,
retained and compacted like any batch, and cross zones only as summaries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.kafka_errors import OUTCOME_UNKNOWN
from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.messages import (
    ANY_EPOCH,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    AppendBatch,
    AppendResult,
)
from zonegate.metastore.models import TopicInfo
from zonegate.runtime.clock import Clock
from zonegate.services.write_path import Wal
from zonegate.transactions.decisions import Markers
from zonegate.transactions.markers import encode_marker
from zonegate.transactions.metadata import TopicPartition
from zonegate.wal_s3.wal_writer import WalEntryLocation

log = logging.getLogger(__name__)
E = ErrorCode


class MarkerCatalog(Protocol):
    def get(self, name: str) -> TopicInfo | None: ...

    async def lookup(self, name: str) -> TopicInfo | None:
        """The topic, also when another node made it since the cache's last refresh."""
        ...


class MarkerLeaders(Protocol):
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]: ...


class WalMarkerWriter:
    def __init__(
        self, catalog: MarkerCatalog, wal: Wal, leaders: MarkerLeaders, clock: Clock
    ) -> None:
        self._catalog = catalog
        self._wal = wal
        self._leaders = leaders
        self._clock = clock

    async def _stream(self, partition: TopicPartition) -> int | None:
        # Looked up, not only read from this node's cache: a topic created through
        # another node an instant before its first transaction ends may not be in the
        # cache yet, and a partition wrongly taken for deleted would get no marker (its
        # transaction would stay open there, and be committed by the next one's marker).
        topic = self._catalog.get(partition[0])
        if topic is None or not 0 <= partition[1] < len(topic.partitions):
            topic = await self._catalog.lookup(partition[0])
        if topic is None or not 0 <= partition[1] < len(topic.partitions):
            return None
        return topic.partitions[partition[1]].stream_id

    async def exists(self, partition: TopicPartition) -> bool:
        return await self._stream(partition) is not None

    async def write_markers(
        self, markers: Markers, partitions: frozenset[TopicPartition]
    ) -> Mapping[TopicPartition, ErrorCode]:
        """Each partition's answer, as Kafka's WriteTxnMarkers answers it: NONE once the
        leader committed the marker; UNKNOWN_TOPIC_OR_PARTITION for a partition the
        catalog does not know (yet, or any more: the role asks `exists`); a failed
        upload KAFKA_STORAGE_ERROR; a leader out of reach NOT_LEADER_OR_FOLLOWER; an
        append whose outcome is unknown REQUEST_TIMED_OUT. All but the leader's
        fencing answers are retried by the role."""
        return await self.write(
            markers.producer_id,
            markers.producer_epoch,
            markers.coordinator_epoch,
            markers.commit,
            partitions,
            repr(markers.transactional_id),
        )

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: frozenset[TopicPartition],
        label: str,
    ) -> Mapping[TopicPartition, ErrorCode]:
        """`write_markers` of one producer's markers (also the admin's abort,
        services/txn_admin.py); `label` names them in log lines."""
        now = self._clock.wall_ms()
        data = encode_marker(producer_id, producer_epoch, coordinator_epoch, commit, now)
        answers: dict[TopicPartition, ErrorCode] = {}
        streams = {tp: await self._stream(tp) for tp in sorted(partitions)}
        staged = []
        for tp, sid in streams.items():
            if sid is None:
                answers[tp] = E.unknown_topic_or_partition
                continue
            # Staged with no await in between: the markers share a WAL object.
            try:
                staged.append((tp, sid, self._wal.append(sid, data)))
            except Exception as exc:  # the WAL closed: the node is stopping
                log.info("marker for %s-%d not staged: %s", tp[0], tp[1], exc)
                answers[tp] = E.kafka_storage_error
        appends: list[tuple[TopicPartition, AppendBatch]] = []
        for tp, sid, fut in staged:
            try:
                loc: WalEntryLocation = await fut
            except Exception as exc:
                log.warning("marker for %s-%d not uploaded: %s", tp[0], tp[1], exc)
                answers[tp] = E.kafka_storage_error
                continue
            batch = AppendBatch(
                stream_id=sid,
                leader_epoch=ANY_EPOCH,
                object_key=loc.object_key,
                position=loc.position,
                length=loc.length,
                record_count=1,
                max_timestamp=now,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=-1,
                transactional=True,
                control=CONTROL_COMMIT if commit else CONTROL_ABORT,
                coordinator_epoch=coordinator_epoch,
            )
            appends.append((tp, batch))
        if appends:
            try:
                results = await self._leaders.append([b for _, b in appends])
            except LeaderUnavailable as exc:
                log.info("markers of %s: %s", label, exc)
                results = [AppendResult(E.not_leader_or_follower)] * len(appends)
            except Exception:
                log.exception("markers of %s: leader append failed", label)
                results = [AppendResult(OUTCOME_UNKNOWN)] * len(appends)
            for (tp, _), r in zip(appends, results, strict=True):
                answers[tp] = r.error
        return answers
