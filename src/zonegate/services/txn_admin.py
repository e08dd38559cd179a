"""Operating transactions (KIP-664): what DescribeTransactions, ListTransactions,
DescribeProducers and the admin's WriteTxnMarkers ask of the node.

- A description comes from the owner of the id's shard (services/txn_routing.py).
- A listing covers the shards FindCoordinator sends this node's clients to (for a client
  of `zone` on `listener`), each asked of its owner, as ListGroups lists the groups a
  node answers for: an admin client asks every broker and merges the answers.
- A partition's producers come from its leader, wherever it runs (leader_forwarder/
  directory.py), as any leader-owned read.
- An admin's abort (`kafka-transactions abort`, Admin.abortTransaction) writes an abort
  marker through the coordinator's own marker path (services/txn_markers.py): staged in
  this node's WAL, appended by the partition's leader, which checks it against the
  partition's transaction rules. Only an abort, and only of a transaction the leader has
  open for that producer; anything else writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.messages import ActiveProducer
from zonegate.metastore.models import NodeRecord, TopicInfo
from zonegate.storage.index import UnknownStream
from zonegate.transactions.coordinator_core import TxnDescription, TxnListing
from zonegate.transactions.metadata import TopicPartition

log = logging.getLogger(__name__)
E = ErrorCode

__all__ = ["ActiveProducer", "TxnAdminService", "TxnDescription", "TxnListing"]


class AdminTxns(Protocol):
    """The routed coordinator calls (services/txn_routing.py's RoutedTxns)."""

    async def describe(self, transactional_id: str) -> TxnDescription: ...

    async def list_transactions(
        self,
        shards: Iterable[int],
        producer_ids: Iterable[int],
        state_names: Iterable[str],
        min_duration_ms: int,
    ) -> tuple[ErrorCode, list[TxnListing], list[str]]: ...


class AdminCluster(Protocol):
    @property
    def node_id(self) -> int: ...

    def txn_coordinator_for(
        self, shard: int, zone: str, listener: str | None = None
    ) -> NodeRecord | None: ...


class AdminCatalog(Protocol):
    def get(self, name: str) -> TopicInfo | None: ...


class ProducerLeaders(Protocol):
    async def producers(self, stream_id: int) -> list[ActiveProducer]: ...


class MarkerWrites(Protocol):
    """services/txn_markers.py's WalMarkerWriter."""

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: frozenset[TopicPartition],
        label: str,
    ) -> Mapping[TopicPartition, ErrorCode]: ...


class TxnAdminService:
    def __init__(
        self,
        txns: AdminTxns,
        cluster: AdminCluster,
        shards: int,
        catalog: AdminCatalog,
        leaders: ProducerLeaders,
        markers: MarkerWrites,
    ) -> None:
        self._txns = txns
        self._cluster = cluster
        self._shards = shards  # transaction.state.log.num.partitions
        self._catalog = catalog
        self._leaders = leaders
        self._markers = markers

    def _stream(self, topic: str, partition: int) -> int | None:
        t = self._catalog.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition].stream_id

    async def describe(self, transactional_id: str) -> TxnDescription:
        return await self._txns.describe(transactional_id)

    def shards_answered(self, zone: str, listener: str | None) -> list[int]:
        """The shards FindCoordinator names this node for, to a client of `zone`."""
        me = self._cluster.node_id
        return [
            s
            for s in range(self._shards)
            if (n := self._cluster.txn_coordinator_for(s, zone, listener)) is not None
            and n.node_id == me
        ]

    async def list_transactions(
        self,
        zone: str,
        listener: str | None,
        producer_ids: Sequence[int],
        state_names: Sequence[str],
        min_duration_ms: int,
    ) -> tuple[ErrorCode, list[TxnListing], list[str]]:
        """ListTransactions over the shards this node answers for. An owner out of reach
        answers COORDINATOR_LOAD_IN_PROGRESS, the one error Kafka's admin client retries
        (its shard is being taken over), and no listing, as Kafka while it loads."""
        error, found, unknown = await self._txns.list_transactions(
            self.shards_answered(zone, listener), producer_ids, state_names, min_duration_ms
        )
        if error == E.not_coordinator:
            error = E.coordinator_load_in_progress
        if error != E.none:
            return error, [], unknown
        return error, found, unknown

    async def producers(self, topic: str, partition: int) -> tuple[ErrorCode, list[ActiveProducer]]:
        """The producers the partition's leader remembers: UNKNOWN_TOPIC_OR_PARTITION for a
        partition the catalog does not know, NOT_LEADER_OR_FOLLOWER with its leader out
        of reach (the admin client looks the leader up again)."""
        sid = self._stream(topic, partition)
        if sid is None:
            return E.unknown_topic_or_partition, []
        try:
            return E.none, await self._leaders.producers(sid)
        except UnknownStream:
            return E.unknown_topic_or_partition, []
        except LeaderUnavailable as exc:
            log.info("producers of %s-%d: %s", topic, partition, exc)
            return E.not_leader_or_follower, []

    async def abort(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """Admin.abortTransaction: an abort marker at each partition where the producer
        has a transaction open, checked by the leader as the coordinator's are (an older
        producer epoch INVALID_PRODUCER_EPOCH, an older coordinator epoch
        TRANSACTION_COORDINATOR_FENCED). Where none is open, nothing is written and the
        answer is NONE: the transaction is not hanging there (any more), as after
        Kafka's no-op marker, and no client can move a producer's epochs this way."""
        answers: dict[TopicPartition, ErrorCode] = {}
        to_write: list[TopicPartition] = []
        for tp in dict.fromkeys(partitions):
            error, producers = await self.producers(*tp)
            if error != E.none:
                answers[tp] = error
            elif any(p.producer_id == producer_id and p.txn_start_offset >= 0 for p in producers):
                to_write.append(tp)
            else:
                answers[tp] = E.none
        if to_write:
            written = await self._markers.write(
                producer_id,
                producer_epoch,
                coordinator_epoch,
                False,
                frozenset(to_write),
                f"the admin's abort of producer {producer_id}",
            )
            for tp in to_write:
                answers[tp] = written.get(tp, E.unknown_server_error)
            log.warning(
                "admin abort of producer %d (epoch %d, coordinator epoch %d) at %s: %s",
                producer_id,
                producer_epoch,
                coordinator_epoch,
                ", ".join(f"{t}-{p}" for t, p in to_write),
                ", ".join(f"{answers[tp].name}" for tp in to_write),
            )
        return answers
