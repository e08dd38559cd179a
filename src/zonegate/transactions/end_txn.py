"""EndTxn's decision for one transactional id, as Kafka 4's TransactionCoordinator takes it.

Two paths, chosen by the request's transaction version (the server's own for the
coordinator's aborts: fences and timeouts). Version 1 (`end_v1`) wants the
client's exact epoch and answers no producer id or epoch. Version 2 (`end_v2`,
KIP-890 part 2) bumps the epoch at every EndTxn, so a retry carries the epoch
below the stored one, and lets a client unsure of the server's state abort with no
transaction open (Kafka's table):

                     abort: retry  current   commit: retry  current
    Empty                   PF     bump              PF     ITS
    CompleteAbort           NONE   bump              ITS    ITS
    CompleteCommit          ITS    bump              NONE   ITS

(PF PRODUCER_FENCED, ITS INVALID_TXN_STATE, bump: PrepareAbort at epoch + 1.)
Both answer an `Answer`, or a `Write` of PrepareCommit/PrepareAbort.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from zonegate.transactions.decisions import After, Answer, ProducerIdsUnavailable, Write
from zonegate.transactions.metadata import TransactionMetadata
from zonegate.transactions.states import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TransactionVersion,
    TxnState,
)

S = TxnState
E = ErrorCode
TV0, TV2 = TransactionVersion.TV_0, TransactionVersion.TV_2


def end_v1(
    meta: TransactionMetadata, pid: int, epoch: int, commit: bool, from_client: bool, now_ms: int
) -> Answer | Write:
    """Kafka 4's endTransactionWithTV1."""
    fencing = meta.pending_state == S.PREPARE_EPOCH_FENCE
    if meta.producer_id != pid:
        return Answer(E.invalid_producer_id_mapping)
    if (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
        return Answer(E.producer_fenced)
    if meta.pending and not fencing:
        return Answer(E.concurrent_transactions)
    state, wanted = meta.state, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    if state == S.ONGOING:
        if wanted == S.PREPARE_ABORT and fencing:
            take_fence(meta, epoch)
        transit = meta.prepare_abort_or_commit(wanted, TV0, NO_PRODUCER_ID, now_ms)
        return Write(meta.transactional_id, transit, After.END_TXN)
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        # A retry of an EndTxn that completed: answered as the first time.
        done = state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        return Answer(E.none if done else E.invalid_txn_state)
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return Answer(E.concurrent_transactions if state == wanted else E.invalid_txn_state)
    if state == S.EMPTY:
        return Answer(E.invalid_txn_state)
    raise IllegalTransition(f"{meta.transactional_id}: EndTxn found {state.name}")


def end_v2(
    meta: TransactionMetadata,
    pid: int,
    epoch: int,
    commit: bool,
    from_client: bool,
    now_ms: int,
    next_producer_id: Callable[[], int],
) -> Answer | Write:
    """Kafka 4's endTransaction for transaction version 2 (the table above)."""
    fencing = meta.pending_state == S.PREPARE_EPOCH_FENCE
    retry_on_overflow = (
        not fencing
        and meta.prev_producer_id == pid
        and epoch == MAX_EPOCH - 1
        and meta.producer_epoch == 0
    )
    retry_on_bump = not fencing and meta.producer_epoch == epoch + 1
    state = meta.state
    if fencing:
        valid = (not from_client or epoch == meta.producer_epoch) and epoch >= meta.producer_epoch
    elif state in (S.ONGOING, S.EMPTY, S.DEAD, S.PREPARE_EPOCH_FENCE):
        valid = epoch == meta.producer_epoch
    elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        valid = retry_on_bump
    else:
        valid = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
    retry = retry_on_bump or retry_on_overflow
    if meta.producer_id != pid and not retry_on_overflow:
        return Answer(E.invalid_producer_id_mapping)
    if not valid:
        return Answer(E.producer_fenced)
    if meta.pending and not fencing:
        return Answer(E.concurrent_transactions)
    same = Answer(E.none, meta.producer_id, meta.producer_epoch)
    its = Answer(E.invalid_txn_state)

    def prepare(wanted: TxnState, no_partition_added: bool) -> Answer | Write:
        next_pid = NO_PRODUCER_ID
        if not fencing and meta.epoch_exhausted:
            # the bump reaches MAX_EPOCH: a new producer id takes over at completion
            try:
                next_pid = next_producer_id()
            except ProducerIdsUnavailable:
                return Answer(E.coordinator_load_in_progress)
        if wanted == S.PREPARE_ABORT and fencing:
            take_fence(meta, epoch)
        transit = meta.prepare_abort_or_commit(wanted, TV2, next_pid, now_ms, no_partition_added)
        return Write(meta.transactional_id, transit, After.END_TXN)

    if state == S.ONGOING:
        return prepare(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
    if state == S.COMPLETE_COMMIT:
        if commit:
            return same if retry else its
        return its if retry else prepare(S.PREPARE_ABORT, True)
    if state == S.COMPLETE_ABORT:
        if commit:
            return its
        return same if retry else prepare(S.PREPARE_ABORT, True)
    if state == S.PREPARE_COMMIT:
        return Answer(E.concurrent_transactions) if commit else its
    if state == S.PREPARE_ABORT:
        return its if commit else Answer(E.concurrent_transactions)
    if state == S.EMPTY:
        return its if commit else prepare(S.PREPARE_ABORT, True)
    raise IllegalTransition(f"{meta.transactional_id}: EndTxn found {state.name}")


def take_fence(meta: TransactionMetadata, epoch: int) -> None:
    """The fence's bump becomes the epoch the abort is written with (Kafka sets it in
    memory before the write; `has_failed_epoch_fence` keeps a failed write from bumping
    twice)."""
    meta.pending_state = None
    meta.producer_epoch = epoch
    meta.last_producer_epoch = NO_PRODUCER_EPOCH
