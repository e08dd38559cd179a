"""The transaction coordinator's decisions for one shard of transactional ids, without I/O.

Kafka's TransactionCoordinator, request by request, with the callbacks turned
into values (the way h11 turns a connection into events): each request
answers either an `Answer` now, or a `Write` of a prepared move that the
coordinator role must make durable in the metadata store and then report with
`written` (or `write_failed`). `written` answers the client and, after a
PrepareCommit or PrepareAbort, hands out the `Markers` to write to every
partition of the transaction; once all are written, `Markers.complete` is
written and reported like any other move. Times are arguments (wall ms);
producer ids come from a callable the role keeps stocked (Kafka's
ProducerIdManager prefetches blocks the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.transactions.decisions import (
    After,
    Answer,
    Markers,
    ProducerIdsUnavailable,
    Write,
    Written,
)
from zonegate.transactions.end_txn import end_v1, end_v2
from zonegate.transactions.metadata import TopicPartition, TransactionMetadata
from zonegate.transactions.states import (
    EXPIRATION_ALLOWED,
    NO_PRODUCER_EPOCH,
    IllegalTransition,
    TransactionVersion,
    TxnState,
    is_epoch_exhausted,
)

S = TxnState
E = ErrorCode
TV2 = TransactionVersion.TV_2


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """One DescribeTransactions answer: Kafka's state name, and the partitions in it."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    start_ms: int = -1
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    version: TransactionVersion = TransactionVersion.TV_2  # the cluster's transaction.version


class TransactionShard:
    """The transactional ids of one shard, on the node coordinating it at `coordinator_epoch`."""

    def __init__(
        self,
        coordinator_epoch: int,
        config: CoordinatorConfig,
        next_producer_id: Callable[[], int],
        txns: Iterable[TransactionMetadata] = (),
    ) -> None:
        self.coordinator_epoch = coordinator_epoch
        self.config = config
        self._next_pid = next_producer_id
        self.txns: dict[str, TransactionMetadata] = {t.transactional_id: t for t in txns}

    # -- InitProducerId ------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        now_ms: int,
    ) -> Answer | Write:
        """`expected` is KIP-360's (producer id, epoch) of a producer that recovers."""
        if transactional_id is None:
            try:
                return Answer(E.none, self._next_pid(), 0)
            except ProducerIdsUnavailable:
                return Answer(E.coordinator_load_in_progress)
        if not transactional_id:
            return Answer(E.invalid_request)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return Answer(E.invalid_transaction_timeout)
        meta = self.txns.get(transactional_id)
        if meta is None:
            try:
                pid = self._next_pid()
            except ProducerIdsUnavailable:
                return Answer(E.coordinator_load_in_progress)
            meta = TransactionMetadata(
                transactional_id, pid, txn_timeout_ms=timeout_ms, txn_last_update_ms=now_ms
            )
            self.txns[transactional_id] = meta
        if meta.pending:
            return Answer(E.concurrent_transactions)
        if expected is not None and not _expected_valid(meta, *expected):
            return Answer(E.producer_fenced)
        state = meta.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return Answer(E.concurrent_transactions)
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
                try:
                    pid = self._next_pid()
                except ProducerIdsUnavailable:
                    return Answer(E.coordinator_load_in_progress)
                transit = meta.prepare_producer_id_rotation(
                    pid, timeout_ms, now_ms, record_last_epoch=expected is not None
                )
            else:
                expected_epoch = None if expected is None else expected[1]
                bumped = meta.prepare_increment_producer_epoch(timeout_ms, expected_epoch, now_ms)
                if bumped is None:
                    return Answer(E.producer_fenced)
                transit = bumped
            return Write(transactional_id, transit, After.INIT_PRODUCER_ID)
        if state == S.ONGOING:
            # Abort the open transaction under a bumped epoch (the zombie is fenced), and
            # tell this producer to retry: its retry bumps again, or rotates the id.
            fence = meta.prepare_fence_producer_epoch()
            return self._end_by_server(meta, fence.producer_epoch, After.FENCE_ABORT, now_ms)
        raise IllegalTransition(f"{transactional_id}: InitProducerId found {state.name}")

    # -- AddPartitionsToTxn, AddOffsetsToTxn, verification ---------------------------

    def add_partitions(
        self,
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        now_ms: int,
        client_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Answer | Write:
        """AddPartitionsToTxn; AddOffsetsToTxn adds the group's offsets partition; under
        TV2 the partition leader adds for the producer (Produce v12, TxnOffsetCommit v5),
        and `client_version` is then TV2."""
        if not transactional_id:
            return Answer(E.invalid_request)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return Answer(E.invalid_producer_id_mapping)
        if meta.producer_epoch != producer_epoch:
            return Answer(E.producer_fenced)
        if meta.pending or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return Answer(E.concurrent_transactions)
        if meta.state == S.ONGOING and partitions <= meta.partitions:
            return Answer(E.none)
        transit = meta.prepare_add_partitions(partitions, now_ms, client_version)
        return Write(transactional_id, transit, After.ADD_PARTITIONS)

    def verify_partitions(
        self,
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1, AddPartitionsToTxn's verify-only form, asked by a partition's
        leader before it takes a transaction's first batch: is the partition in the
        transaction? A pending move does not matter: a partition joins the set when its
        addition is durable and leaves it when its marker is."""
        parts = list(partitions)
        if not transactional_id:
            return dict.fromkeys(parts, E.invalid_request)
        meta = self.txns.get(transactional_id)
        error: ErrorCode | None = None
        if meta is None or meta.producer_id != producer_id:
            error = E.invalid_producer_id_mapping
        elif meta.producer_epoch != producer_epoch:
            error = E.producer_fenced
        elif meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = E.concurrent_transactions
        if error is not None or meta is None:
            return dict.fromkeys(parts, error or E.invalid_producer_id_mapping)
        return {p: E.none if p in meta.partitions else E.transaction_abortable for p in parts}

    # -- EndTxn ----------------------------------------------------------------------

    def end_txn(
        self,
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_version: TransactionVersion,
        now_ms: int,
    ) -> Answer | Write:
        """`client_version` is the request's: TV2 for EndTxn v5 from a client that sees
        transaction.version 2 finalized, else TV0."""
        if not transactional_id:
            return Answer(E.invalid_request)
        meta = self.txns.get(transactional_id)
        if meta is None:
            return Answer(E.invalid_producer_id_mapping)
        if client_version.supports_epoch_bump:
            return end_v2(meta, producer_id, producer_epoch, commit, True, now_ms, self._next_pid)
        return end_v1(meta, producer_id, producer_epoch, commit, True, now_ms)

    def _end_by_server(
        self, meta: TransactionMetadata, epoch: int, after: After, now_ms: int
    ) -> Answer | Write:
        """The coordinator's own abort (a fence or a timeout), under the cluster's
        transaction.version, with the fence's bumped epoch as the producer's."""
        pid = meta.producer_id
        if self.config.version.supports_epoch_bump:
            d = end_v2(meta, pid, epoch, False, False, now_ms, self._next_pid)
        else:
            d = end_v1(meta, pid, epoch, False, False, now_ms)
        if isinstance(d, Write):
            return Write(d.transactional_id, d.transit, after)
        meta.pending_state = None  # the fence prepared for it is not going ahead
        return d

    # -- the write's outcome -----------------------------------------------------------

    def written(self, w: Write, now_ms: int) -> Written:
        """The prepared move is durable: apply it, answer, and say what follows."""
        meta = self.txns[w.transactional_id]
        if w.after == After.EXPIRE:
            meta.pending_state = None
            meta.state = S.DEAD
            del self.txns[w.transactional_id]
            return Written(None)
        meta.complete_transition(w.transit)
        if w.after == After.INIT_PRODUCER_ID:
            return Written(Answer(E.none, meta.producer_id, meta.producer_epoch))
        if w.after == After.ADD_PARTITIONS:
            return Written(Answer(E.none))
        if w.after == After.COMPLETE:
            return Written(None)
        markers = self._markers(meta, now_ms)
        if w.after == After.END_TXN:
            # EndTxn v5 (TV2) answers the bumped epoch; earlier versions carry none.
            if w.transit.client_version.supports_epoch_bump:
                return Written(Answer(E.none, meta.producer_id, meta.producer_epoch), markers)
            return Written(Answer(E.none), markers)
        if w.after == After.FENCE_ABORT:
            return Written(Answer(E.concurrent_transactions), markers)
        return Written(None, markers)

    def _markers(self, meta: TransactionMetadata, now_ms: int) -> Markers:
        pid, epoch, parts = meta.producer_id, meta.producer_epoch, frozenset(meta.partitions)
        commit = meta.state == S.PREPARE_COMMIT
        complete = Write(meta.transactional_id, meta.prepare_complete(now_ms), After.COMPLETE)
        txn_id, coordinator_epoch = meta.transactional_id, self.coordinator_epoch
        return Markers(txn_id, pid, epoch, commit, coordinator_epoch, parts, complete)

    def write_failed(self, w: Write, error: ErrorCode) -> Answer | None:
        """The write did not land (NOT_COORDINATOR when the shard moved, else
        COORDINATOR_NOT_AVAILABLE): nothing changed, the client retries."""
        meta = self.txns.get(w.transactional_id)
        if meta is not None:
            meta.abort_transition()
            if w.after in (After.FENCE_ABORT, After.TIMEOUT_ABORT):
                meta.has_failed_epoch_fence = True
        if w.after in (After.TIMEOUT_ABORT, After.COMPLETE, After.EXPIRE):
            return None
        return Answer(error)

    def complete_again(self, transactional_id: str, now_ms: int) -> Write | None:
        """The write of a completion failed (the store was out of reach): the same move,
        prepared again, for the role to retry until it lands or the shard is lost (Kafka
        keeps such writes in its txnLogAppendRetryQueue). None when there is nothing to
        complete any more."""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.pending or meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return None
        return Write(transactional_id, meta.prepare_complete(now_ms), After.COMPLETE)

    def loaded(self, now_ms: int) -> list[Markers]:
        """After this node took the shard over: the transactions its predecessor left
        between EndTxn and the end of their markers, whose markers it now writes
        (with this coordinator epoch: a late marker of the predecessor is fenced)."""
        return [
            self._markers(meta, now_ms)
            for meta in self.txns.values()
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and not meta.pending
        ]

    def markers_partition_gone(self, transactional_id: str, partition: TopicPartition) -> None:
        """A partition deleted before its marker was written needs none (Kafka drops it)."""
        meta = self.txns.get(transactional_id)
        if meta is not None and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            meta.partitions.discard(partition)

    # -- admin (KIP-664) ---------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnDescription:
        """DescribeTransactions for one id: TRANSACTIONAL_ID_NOT_FOUND when unknown or
        being expired (Dead), INVALID_REQUEST for an empty id."""
        if not transactional_id:
            return TxnDescription(transactional_id, E.invalid_request)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state == S.DEAD:
            return TxnDescription(transactional_id, E.transactional_id_not_found)
        return TxnDescription(
            transactional_id,
            E.none,
            meta.state.kafka_name,
            meta.producer_id,
            meta.producer_epoch,
            meta.txn_timeout_ms,
            meta.txn_start_ms,
            frozenset(meta.partitions),
        )

    def list_transactions(
        self,
        producer_ids: Iterable[int],
        state_names: Iterable[str],
        min_duration_ms: int,
        now_ms: int,
    ) -> tuple[list[TxnListing], list[str]]:
        """ListTransactions (v1 adds the duration filter, -1: none): the ids that pass
        every filter given, and the state names Kafka does not know (answered as
        `unknown_state_filters`; a filter of only unknown names matches nothing)."""
        pids, names = set(producer_ids), list(state_names)
        states = {st for n in names if (st := TxnState.from_kafka_name(n)) is not None}
        unknown = [n for n in names if TxnState.from_kafka_name(n) is None]
        out = []
        for meta in self.txns.values():
            if meta.state == S.DEAD:
                continue  # being expired: Kafka leaves it out
            if pids and meta.producer_id not in pids:
                continue
            if names and meta.state not in states:
                continue
            if min_duration_ms >= 0 and now_ms - meta.txn_start_ms <= min_duration_ms:
                continue
            out.append(TxnListing(meta.transactional_id, meta.producer_id, meta.state.kafka_name))
        return out, unknown

    # -- time ------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When the earliest open transaction times out, for the role's one timer."""
        ends = [
            m.txn_start_ms + m.txn_timeout_ms
            for m in self.txns.values()
            if m.state == S.ONGOING and not m.pending
        ]
        return min(ends, default=None)

    def abort_timed_out(self, now_ms: int) -> list[Write]:
        """Transactions open longer than their timeout, aborted under a bumped epoch so
        the producer that left them is fenced (Kafka's abortTimedOutTransactions)."""
        out: list[Write] = []
        for meta in list(self.txns.values()):
            if meta.state != S.ONGOING or meta.pending:
                continue
            if meta.txn_start_ms + meta.txn_timeout_ms >= now_ms:
                continue
            fence = meta.prepare_fence_producer_epoch()
            decision = self._end_by_server(meta, fence.producer_epoch, After.TIMEOUT_ABORT, now_ms)
            if isinstance(decision, Write):
                out.append(decision)
        return out

    def expire_ids(self, now_ms: int) -> list[Write]:
        """Ids idle past transactional.id.expiration.ms with no open transaction."""
        out: list[Write] = []
        for meta in self.txns.values():
            if (
                meta.state in EXPIRATION_ALLOWED
                and not meta.pending
                and meta.txn_last_update_ms + self.config.id_expiration_ms <= now_ms
            ):
                out.append(Write(meta.transactional_id, meta.prepare_dead(), After.EXPIRE))
        return out


def _expected_valid(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: a recovering producer keeps its id unless someone else took over: the
    metadata was just made, it names the current id, or the previous one whose epochs
    ran out (a retry of the rotation whose answer was lost)."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.prev_producer_id and is_epoch_exhausted(epoch))
    )
