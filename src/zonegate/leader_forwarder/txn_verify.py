"""KIP-890 part 1 at the partition leader: a transaction's first batch at a partition is
taken only once the transaction coordinator says the partition is in the transaction.

Before an append is queued for the group commit, each transactional batch of a producer
with no transaction open here at its epoch (`PartitionTxns.needs_verification`) begins a
verification (a guard the batch carries into its cycle; a marker written meanwhile drops
it) and the id's coordinator is asked, once per producer for all its partitions of the
append: AddPartitionsToTxn's verify-only form for Produce v11 and older, and from v12
(transaction version 2) the add itself, made on the producer's behalf, as Kafka 4 does.
A batch whose answer is not NONE never reaches the cycle: it is answered as Kafka
translates the coordinator's answer (transactions/verification.py). Batches of a
transaction already open here need no question. This is Kafka's
AddPartitionsToTxnManager and ReplicaManager's verification callback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.messages import CONTROL_NONE, AppendBatch
from zonegate.leader_forwarder.partitions import PartitionState, PartitionStates
from zonegate.transactions.decisions import Answer
from zonegate.transactions.metadata import TopicPartition
from zonegate.transactions.partition_txns import UNVERIFIED
from zonegate.transactions.states import TransactionVersion
from zonegate.transactions.verification import produce_error

E = ErrorCode
IMPLICIT_ADD_VERSION = 12  # Produce v12: the leader adds the partition (TV2)


class TxnCoordinators(Protocol):
    """The transaction coordinators as a leader asks them (services/txn_routing.py)."""

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]: ...

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        client_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Answer: ...


class TxnVerifier:
    def __init__(
        self,
        partitions: PartitionStates,
        coordinators: TxnCoordinators | None,
        partition_of: Callable[[int], TopicPartition | None],
        refresh: Callable[[], Awaitable[object]] | None = None,
        *,
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        self._partitions = partitions
        self._coordinators = coordinators
        self._partition_of = partition_of  # stream id -> (topic, partition), None: unknown
        # Reloads what `partition_of` reads: a topic created through another node may
        # not be in this node's catalog yet when its first transactional batch comes.
        self._refresh = refresh
        # transaction.partition.verification.enable: when off, a batch of Produce v11 or
        # older opens its transaction unverified, as Kafka; v12's add is always made (the
        # coordinator learns of the partition only so under TV2). Asked at each batch:
        # AlterConfigs may change it at run time (services/leader_txn_settings.py).
        self._enabled = enabled

    @property
    def enabled(self) -> bool:
        """transaction.partition.verification.enable as in force now."""
        return self._enabled()

    async def verify(
        self, batches: Sequence[AppendBatch], now_ms: int
    ) -> tuple[dict[int, tuple[int, PartitionState]], dict[int, ErrorCode]]:
        """For the batches (by index) that need it: the guard of a verification the
        coordinator confirmed, with the partition state it was begun on, or the error to
        answer instead."""
        asked: dict[
            tuple[str, int, int, int], list[tuple[int, TopicPartition, int, PartitionState]]
        ] = {}
        refused: dict[int, ErrorCode] = {}
        guards: dict[int, tuple[int, PartitionState]] = {}
        for i, b in enumerate(batches):
            if not b.transactional or b.control != CONTROL_NONE or b.producer_id < 0:
                continue
            p = self._partitions.cached(b.stream_id)
            if p is None or not p.txns.needs_verification(b.producer_id, b.producer_epoch, True):
                continue  # not led here (the cycle answers), or its transaction is open here
            if b.produce_version < IMPLICIT_ADD_VERSION and not self.enabled:
                guards[i] = (UNVERIFIED, p)
                continue
            tp = self._partition_of(b.stream_id)
            if tp is None and self._refresh is not None:
                await self._refresh()
                tp = self._partition_of(b.stream_id)
            if not b.transactional_id or tp is None or self._coordinators is None:
                refused[i] = E.invalid_txn_state  # nothing to verify against
                continue
            guard = p.txns.begin_verification(
                b.producer_id, b.producer_epoch, b.base_sequence, now_ms
            )
            key = (b.transactional_id, b.producer_id, b.producer_epoch, b.produce_version)
            asked.setdefault(key, []).append((i, tp, guard, p))
        for (tid, pid, epoch, version), items in asked.items():
            answers = await self._ask(tid, pid, epoch, version, [tp for _, tp, _, _ in items])
            for i, tp, guard, p in items:
                error = answers.get(tp, E.invalid_txn_state)
                if error == E.none:
                    guards[i] = (guard, p)
                else:
                    refused[i] = produce_error(error, version)[0]
        return guards, refused

    async def _ask(
        self, tid: str, pid: int, epoch: int, version: int, parts: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        assert self._coordinators is not None
        if version >= IMPLICIT_ADD_VERSION:
            answer = await self._coordinators.add_partitions(
                tid, pid, epoch, parts, TransactionVersion.TV_2
            )
            return dict.fromkeys(parts, answer.error)
        return await self._coordinators.verify_partitions(tid, pid, epoch, parts)
