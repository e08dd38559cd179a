"""One transactional id's state and the two-step moves between states (Kafka's TransactionMetadata).

A move is prepared (`prepare_*`: the target as a `TxnTransit`, and the metadata's
`pending_state` set so nothing else moves it meanwhile), written to the
metadata store, and only then completed (`complete_transition`), which checks
the transit against what is current and then takes it whole. A write that fails
clears the pending state (`abort_transition`). This is Kafka's order: no answer
and no marker reveals a state before it is durable, so a coordinator that dies
between the two steps leaves the last written state, which its successor loads.
The rules are Kafka 4's (transaction-coordinator/.../TransactionMetadata.java).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from zonegate.transactions.states import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PENDING_TRANSACTION,
    VALID_PREVIOUS,
    IllegalTransition,
    TransactionVersion,
    TxnState,
    is_epoch_exhausted,
)

TopicPartition = tuple[str, int]
TV0 = TransactionVersion.TV_0
S = TxnState


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a prepared move leads to: what is written to the metadata store."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    txn_last_update_ms: int
    client_version: TransactionVersion = TV0


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    client_version: TransactionVersion = TV0
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    pending_state: TxnState | None = None
    # A fence whose write failed already bumped the epoch in memory; the next attempt
    # must not bump it again (the bumped epoch was never given to anyone).
    has_failed_epoch_fence: bool = False

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # -- prepare -----------------------------------------------------------------
    # Each prepare starts from the current fields (Kafka's TransitionData) and changes
    # only what its move changes.

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Bump the epoch to fence the current producer (InitProducerId during a
        transaction, or the transaction timed out); the abort follows."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransition("cannot fence a producer at epoch 32767: it would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, producer_epoch=bumped)

    def prepare_increment_producer_epoch(
        self, new_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | None:
        """InitProducerId's bump; None when `expected_epoch` shows a fenced producer
        (answered PRODUCER_FENCED)."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"no epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            # The producer carries on after an error, and no one else initialised since.
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: the answer it lost, unchanged.
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(
            S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=new_timeout_ms,
            partitions=frozenset(),
            txn_start_ms=-1,
            txn_last_update_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        if self.state in PENDING_TRANSACTION:
            raise IllegalTransition("cannot rotate producer ids while a transaction is pending")
        return self._prepare(
            S.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=new_timeout_ms,
            partitions=frozenset(),
            txn_start_ms=-1,
            txn_last_update_ms=now_ms,
        )

    def prepare_add_partitions(
        self,
        added: frozenset[TopicPartition],
        now_ms: int,
        client_version: TransactionVersion = TV0,
    ) -> TxnTransit:
        starts = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        return self._prepare(
            S.ONGOING,
            partitions=frozenset(self.partitions | added),
            txn_start_ms=now_ms if starts else self.txn_start_ms,
            txn_last_update_ms=now_ms,
            client_version=client_version,
        )

    def prepare_abort_or_commit(
        self,
        new_state: TxnState,
        client_version: TransactionVersion,
        next_pid: int,
        now_ms: int,
        no_partition_added: bool = False,
    ) -> TxnTransit:
        if client_version.supports_epoch_bump:
            # TV2: every transaction ends with a bump, so a zombie's late write of this
            # transaction is fenced at the partition (KIP-890 part 2).
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._prepare(
            new_state,
            producer_epoch=epoch,
            last_producer_epoch=last,
            # TV2's abort with no transaction open has no start: the abort's time stands in
            txn_start_ms=now_ms if no_partition_added else self.txn_start_ms,
            next_producer_id=next_pid,
            txn_last_update_ms=now_ms,
            client_version=client_version,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        self.has_failed_epoch_fence = False  # the Prepare* was written: the fence holds
        done = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if self.client_version.supports_epoch_bump and self.next_producer_id != NO_PRODUCER_ID:
            # The epoch overflowed at EndTxn: the new producer id takes over now, and the
            # last epoch stays the one the client saw (Kafka: MAX-1, then 0).
            pid, epoch = self.next_producer_id, 0
        else:
            pid, epoch = self.producer_id, self.producer_epoch
        return self._prepare(
            done,
            producer_id=pid,
            producer_epoch=epoch,
            next_producer_id=NO_PRODUCER_ID,
            partitions=frozenset(),
            txn_last_update_ms=now_ms,
        )

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(S.DEAD, partitions=frozenset())

    def _prepare(
        self,
        state: TxnState,
        *,
        producer_id: int | None = None,
        next_producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        txn_start_ms: int | None = None,
        txn_last_update_ms: int | None = None,
        client_version: TransactionVersion | None = None,
    ) -> TxnTransit:
        pid = self.producer_id if producer_id is None else producer_id
        epoch = self.producer_epoch if producer_epoch is None else producer_epoch
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: move to {state.name} prepared while "
                f"{self.pending_state.name} is pending"
            )
        if pid < 0:
            raise IllegalTransition(f"illegal new producer id {pid}")
        if state != S.DEAD and epoch < 0:
            raise IllegalTransition(f"illegal new producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.name} may not move to {state.name}"
            )
        self.pending_state = state
        return TxnTransit(
            producer_id=pid,
            prev_producer_id=self.producer_id,
            next_producer_id=_or(next_producer_id, self.next_producer_id),
            producer_epoch=epoch,
            last_producer_epoch=_or(last_producer_epoch, self.last_producer_epoch),
            txn_timeout_ms=_or(txn_timeout_ms, self.txn_timeout_ms),
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            txn_start_ms=_or(txn_start_ms, self.txn_start_ms),
            txn_last_update_ms=_or(txn_last_update_ms, self.txn_last_update_ms),
            client_version=self.client_version if client_version is None else client_version,
        )

    # -- complete ----------------------------------------------------------------

    def abort_transition(self) -> None:
        """The write of the prepared move failed: nothing changes but the pending mark."""
        self.pending_state = None

    def complete_transition(self, t: TxnTransit) -> None:
        """Apply a prepared move once written: checked against what is current, then
        taken whole. A transit that does not match is a bug (IllegalTransition)."""
        if self.pending_state is None or self.pending_state != t.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {t} without its prepare")
        s = t.state
        if s == S.EMPTY:  # InitProducerId
            if (
                (self.producer_epoch != t.producer_epoch and not self._valid_epoch_bump(t))
                or t.partitions
                or t.txn_start_ms != -1
            ):
                self._fail(t)
        elif s == S.ONGOING:  # AddPartitionsToTxn, AddOffsetsToTxn
            if (
                not self._valid_epoch(t)
                or not self.partitions <= t.partitions
                or self.txn_timeout_ms != t.txn_timeout_ms
            ):
                self._fail(t)
        elif s in (S.PREPARE_COMMIT, S.PREPARE_ABORT):  # EndTxn
            empty_abort = (
                s == S.PREPARE_ABORT
                and t.client_version.supports_epoch_bump
                and self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            )
            if (
                not self._valid_epoch(t)
                or self.partitions != t.partitions
                or self.txn_timeout_ms != t.txn_timeout_ms
                or (self.txn_start_ms != t.txn_start_ms and not empty_abort)
            ):
                self._fail(t)
        elif s in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):  # markers written
            if (
                not self._valid_epoch(t)
                or self.txn_timeout_ms != t.txn_timeout_ms
                or t.txn_start_ms == -1
            ):
                self._fail(t)
        else:
            # PrepareEpochFence is never written (the abort replaces it); Dead is never
            # written either (an expired id is deleted).
            self._fail(t)
        self.producer_id = t.producer_id
        self.prev_producer_id = t.prev_producer_id
        self.next_producer_id = t.next_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.partitions = set(t.partitions)
        self.txn_start_ms = t.txn_start_ms
        self.txn_last_update_ms = t.txn_last_update_ms
        self.client_version = t.client_version
        self.pending_state = None
        self.state = s

    def _valid_epoch(self, t: TxnTransit) -> bool:
        """Kafka's validProducerEpoch: under TV2 a completion after an overflow names the
        old id as previous and keeps the last epoch; a Prepare* bumped from the current
        epoch; everything else keeps id and epoch."""
        tv2 = t.client_version.supports_epoch_bump
        if tv2 and t.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and t.producer_epoch == 0:
            return (
                t.last_producer_epoch == self.last_producer_epoch
                and t.prev_producer_id == self.producer_id
            )
        if tv2 and t.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return (
                t.last_producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
            )
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def _valid_epoch_bump(self, t: TxnTransit) -> bool:
        return t.producer_epoch == self.producer_epoch + 1 or (
            t.producer_epoch == 0 and t.producer_id != self.producer_id
        )

    def _fail(self, t: TxnTransit) -> None:
        raise IllegalTransition(
            f"{self.transactional_id}: transit {t} does not match {self.state.name} "
            f"(epoch {self.producer_epoch}, producer id {self.producer_id})"
        )

    def snapshot(self) -> TransactionMetadata:
        """A copy: what a test or a describe answer reads without sharing the partition set."""
        return dataclasses.replace(self, partitions=set(self.partitions))


def _or(value: int | None, current: int) -> int:
    return current if value is None else value
