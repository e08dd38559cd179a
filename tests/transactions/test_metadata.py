"""One transactional id's two-step moves, ported from Kafka 4's TransactionMetadataTest."""

from __future__ import annotations

import pytest

from zonegate.transactions.metadata import TransactionMetadata, TxnTransit
from zonegate.transactions.states import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TransactionVersion,
    TxnState,
)

pytestmark = pytest.mark.unit

S = TxnState
TV0, TV2 = TransactionVersion.TV_0, TransactionVersion.TV_2
PID = 23423
NOW = 1_700_000_000_000


def txn(epoch: int, state: TxnState = S.EMPTY, **kw: object) -> TransactionMetadata:
    args: dict[str, object] = {"txn_timeout_ms": 30000, "state": state, "txn_last_update_ms": NOW}
    args.update(kw)
    return TransactionMetadata("txnlId", PID, producer_epoch=epoch, **args)  # type: ignore[arg-type]


def bump(m: TransactionMetadata, expected: int | None, now: int = NOW) -> TxnTransit:
    t = m.prepare_increment_producer_epoch(30000, expected, now)
    assert t is not None
    return t


def test_initialize_epoch() -> None:
    m = txn(NO_PRODUCER_EPOCH)
    m.complete_transition(bump(m, None))
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch) == (PID, 0, NO_PRODUCER_EPOCH)


def test_normal_epoch_bump() -> None:
    m = txn(735)
    m.complete_transition(bump(m, None))
    assert (m.producer_epoch, m.last_producer_epoch) == (736, NO_PRODUCER_EPOCH)


def test_bump_not_allowed_if_epochs_exhausted() -> None:
    m = txn(MAX_EPOCH - 1)
    assert m.epoch_exhausted
    with pytest.raises(IllegalTransition):
        m.prepare_increment_producer_epoch(30000, None, NOW)


def test_tolerate_update_time_shift_during_epoch_bump() -> None:
    m = txn(1, txn_start_ms=1)
    m.complete_transition(bump(m, 1, NOW - 1))
    assert (m.producer_epoch, m.last_producer_epoch) == (2, 1)
    assert (m.txn_start_ms, m.txn_last_update_ms) == (-1, NOW - 1)


def test_tolerate_update_time_reset_during_producer_id_rotation() -> None:
    m = txn(1, txn_start_ms=1)
    m.complete_transition(m.prepare_producer_id_rotation(PID + 1, 30000, NOW - 1, True))
    assert (m.producer_id, m.prev_producer_id, m.producer_epoch) == (PID + 1, PID, 0)
    assert (m.last_producer_epoch, m.txn_start_ms, m.txn_last_update_ms) == (1, -1, NOW - 1)


def test_tolerate_time_shift_during_add_partitions() -> None:
    m = txn(1, txn_start_ms=NOW)
    m.complete_transition(m.prepare_add_partitions(frozenset({("topic1", 0)}), NOW - 1))
    assert (m.state, m.txn_start_ms, m.txn_last_update_ms) == (S.ONGOING, NOW - 1, NOW - 1)
    m.complete_transition(m.prepare_add_partitions(frozenset({("topic2", 0)}), NOW - 2))
    assert m.partitions == {("topic1", 0), ("topic2", 0)}
    assert (m.txn_start_ms, m.txn_last_update_ms) == (NOW - 1, NOW - 2)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_tolerate_time_shift_during_prepare(state: TxnState) -> None:
    m = txn(1, S.ONGOING, txn_start_ms=1)
    m.complete_transition(m.prepare_abort_or_commit(state, TV0, NO_PRODUCER_ID, NOW - 1))
    assert (m.state, m.producer_epoch, m.txn_start_ms, m.txn_last_update_ms) == (
        state,
        1,
        1,
        NOW - 1,
    )


@pytest.mark.parametrize("tv", [TV0, TV2])
@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_tolerate_time_shift_during_complete(state: TxnState, tv: TransactionVersion) -> None:
    m = txn(1, state, txn_start_ms=1, client_version=tv, last_producer_epoch=0)
    m.complete_transition(m.prepare_complete(NOW - 1))
    done = S.COMPLETE_COMMIT if state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (done, 1, 0)
    assert (m.txn_start_ms, m.txn_last_update_ms) == (1, NOW - 1)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT])
def test_tv2_aborts_with_no_transaction_open(state: TxnState) -> None:
    """Kafka 4: a TV2 client unsure of the server's state aborts anyway; the abort's time
    stands in for the start of a transaction that never began."""
    m = txn(735, state, txn_start_ms=NOW - 1 if state != S.EMPTY else -1, client_version=TV2)
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, TV2, NO_PRODUCER_ID, NOW + 1, True)
    m.complete_transition(t)
    assert (m.producer_id, m.producer_epoch, m.txn_start_ms) == (PID, 736, NOW + 1)


def test_commit_with_no_transaction_open_is_a_bug() -> None:
    with pytest.raises(IllegalTransition):
        txn(735, S.EMPTY).prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, NO_PRODUCER_ID, NOW)


def test_fence_producer_after_epochs_exhausted() -> None:
    m = txn(MAX_EPOCH - 1, S.ONGOING)
    fence = m.prepare_fence_producer_epoch()
    assert (fence.producer_epoch, fence.last_producer_epoch) == (MAX_EPOCH, NO_PRODUCER_EPOCH)
    assert m.pending_state == S.PREPARE_EPOCH_FENCE
    m.pending_state = None  # the abort takes the fence's place
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, TV0, NO_PRODUCER_ID, NOW)
    m.complete_transition(t)
    assert t.producer_id == PID


def test_fence_not_allowed_if_it_would_overflow() -> None:
    with pytest.raises(IllegalTransition):
        txn(MAX_EPOCH, S.ONGOING).prepare_fence_producer_epoch()


def test_rotate_producer_id() -> None:
    m = txn(MAX_EPOCH - 1)
    m.complete_transition(m.prepare_producer_id_rotation(9893, 30000, NOW, True))
    assert (m.producer_id, m.prev_producer_id, m.producer_epoch) == (9893, PID, 0)
    assert m.last_producer_epoch == MAX_EPOCH - 1


def test_epoch_bump_on_end_txn() -> None:
    m = txn(10, S.ONGOING, txn_start_ms=NOW)
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, NO_PRODUCER_ID, NOW - 1))
    assert (m.producer_id, m.producer_epoch, m.client_version) == (PID, 11, TV2)
    m.complete_transition(m.prepare_complete(NOW))
    assert (m.producer_id, m.producer_epoch, m.client_version) == (PID, 11, TV2)


def test_epoch_bump_on_end_txn_overflow() -> None:
    m = txn(MAX_EPOCH - 1, S.ONGOING, txn_start_ms=NOW)
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, 9893, NOW - 1))
    assert (m.producer_id, m.producer_epoch) == (PID, MAX_EPOCH)
    m.complete_transition(m.prepare_complete(NOW))
    assert (m.producer_id, m.producer_epoch, m.client_version) == (9893, 0, TV2)
    # the last epoch stays the one the client saw before the new id (Kafka 4)
    assert (m.last_producer_epoch, m.prev_producer_id) == (MAX_EPOCH - 1, PID)


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT])
def test_rotate_producer_id_during_a_transaction_is_a_bug(state: TxnState) -> None:
    with pytest.raises(IllegalTransition):
        txn(MAX_EPOCH - 1, state).prepare_producer_id_rotation(9893, 30000, NOW, False)


def test_attempted_epoch_bump_with_newly_created_metadata() -> None:
    m = txn(NO_PRODUCER_EPOCH)
    m.complete_transition(bump(m, 735))
    assert (m.producer_epoch, m.last_producer_epoch) == (0, NO_PRODUCER_EPOCH)


def test_epoch_bump_with_current_epoch_provided() -> None:
    m = txn(735)
    m.complete_transition(bump(m, 735))
    assert (m.producer_epoch, m.last_producer_epoch) == (736, 735)


def test_attempted_epoch_bump_with_last_epoch() -> None:
    m = txn(735, last_producer_epoch=734)
    m.complete_transition(bump(m, 734))
    assert (m.producer_epoch, m.last_producer_epoch) == (735, 734)


def test_attempted_epoch_bump_with_fenced_epoch() -> None:
    m = txn(735, last_producer_epoch=734, prev_producer_id=PID)
    assert m.prepare_increment_producer_epoch(30000, 733, NOW) is None


def test_completing_what_was_not_prepared_is_a_bug() -> None:
    m = txn(1, S.ONGOING, txn_start_ms=1)
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV0, NO_PRODUCER_ID, NOW)
    m.abort_transition()
    with pytest.raises(IllegalTransition):
        m.complete_transition(t)


def test_a_transit_from_another_epoch_is_a_bug() -> None:
    m = txn(1, S.ONGOING, txn_start_ms=1)
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV0, NO_PRODUCER_ID, NOW)
    m.producer_epoch = 2  # what a concurrent fence would have done
    with pytest.raises(IllegalTransition):
        m.complete_transition(t)


def test_the_fence_itself_is_never_completed() -> None:
    m = txn(1, S.ONGOING)
    with pytest.raises(IllegalTransition):
        m.complete_transition(m.prepare_fence_producer_epoch())
