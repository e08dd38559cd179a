"""The coordinator's decisions, request by request and state by state, ported from Kafka's
TransactionCoordinatorTest where a case carries over (the callbacks become return values),
plus the whole request x state table and the flows through writes, markers, fences,
timeouts (on a ManualClock's wall time), failover and expiry."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode as E

from zonegate.runtime.clock import ManualClock
from zonegate.transactions.coordinator_core import CoordinatorConfig, TransactionShard
from zonegate.transactions.decisions import After, Answer, Markers, ProducerIdsUnavailable, Write
from zonegate.transactions.metadata import TransactionMetadata
from zonegate.transactions.states import MAX_EPOCH, TransactionVersion, TxnState

pytestmark = pytest.mark.unit

S = TxnState
TV0, TV2 = TransactionVersion.TV_0, TransactionVersion.TV_2
TX = "tx"
PID, EPOCH = 10, 5
P0, P1 = ("t", 0), ("t", 1)


def pids(start: int = 100) -> Iterator[int]:
    n = start
    while True:
        yield n
        n += 1


def shard(*txns: TransactionMetadata, version: TransactionVersion = TV2) -> TransactionShard:
    it = pids()
    return TransactionShard(3, CoordinatorConfig(version=version), lambda: next(it), txns)


def meta(state: TxnState, tv: TransactionVersion = TV0, **kw: object) -> TransactionMetadata:
    open_ = state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT)
    args: dict[str, object] = {
        "producer_epoch": EPOCH,
        "txn_timeout_ms": 1000,
        "state": state,
        "partitions": {P0} if open_ else set(),
        "txn_start_ms": 50 if open_ or state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else -1,
        "txn_last_update_ms": 60,
        "client_version": tv,
    }
    args.update(kw)
    return TransactionMetadata(TX, PID, **args)  # type: ignore[arg-type]


def write(d: Answer | Write) -> Write:
    assert isinstance(d, Write), d
    return d


# -- the request x state table ---------------------------------------------------------

OPEN_STATES = [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT]
STATES = [*OPEN_STATES, S.COMPLETE_COMMIT, S.COMPLETE_ABORT]
CC = E.concurrent_transactions
# state -> (InitProducerId, AddPartitions new, AddPartitions present, verify P0,
#           EndTxn commit, EndTxn abort); a TxnState is a Write to that state.
TABLE: dict[TxnState, tuple[object, ...]] = {
    S.EMPTY: (S.EMPTY, S.ONGOING, S.ONGOING, E.transaction_abortable,
              E.invalid_txn_state, E.invalid_txn_state),
    S.ONGOING: (S.PREPARE_ABORT, S.ONGOING, E.none, E.none, S.PREPARE_COMMIT, S.PREPARE_ABORT),
    S.PREPARE_COMMIT: (CC, CC, CC, CC, CC, E.invalid_txn_state),
    S.PREPARE_ABORT: (CC, CC, CC, CC, E.invalid_txn_state, CC),
    S.COMPLETE_COMMIT: (S.EMPTY, S.ONGOING, S.ONGOING, E.transaction_abortable,
                        E.none, E.invalid_txn_state),
    S.COMPLETE_ABORT: (S.EMPTY, S.ONGOING, S.ONGOING, E.transaction_abortable,
                       E.invalid_txn_state, E.none),
}  # fmt: skip


def _outcome(d: Answer | Write) -> object:
    return d.transit.state if isinstance(d, Write) else d.error


@pytest.mark.parametrize("state", STATES)
def test_every_request_in_every_state(state: TxnState) -> None:
    init, add_new, add_present, verify, commit, abort = TABLE[state]
    now = 1000
    assert _outcome(shard(meta(state)).init_producer_id(TX, 1000, None, now)) == init
    got = shard(meta(state)).add_partitions(TX, PID, EPOCH, frozenset({P1}), now)
    assert _outcome(got) == add_new
    got = shard(meta(state)).add_partitions(TX, PID, EPOCH, frozenset({P0}), now)
    assert _outcome(got) == add_present
    assert shard(meta(state)).verify_partitions(TX, PID, EPOCH, [P0]) == {P0: verify}
    assert _outcome(shard(meta(state)).end_txn(TX, PID, EPOCH, True, TV0, now)) == commit
    assert _outcome(shard(meta(state)).end_txn(TX, PID, EPOCH, False, TV0, now)) == abort


@pytest.mark.parametrize("state", STATES)
def test_a_pending_move_makes_every_request_wait(state: TxnState) -> None:
    m = meta(state, pending_state=state)
    s = shard(m)
    assert s.init_producer_id(TX, 1000, None, 1) == Answer(CC)
    assert s.add_partitions(TX, PID, EPOCH, frozenset({P1}), 1) == Answer(CC)
    assert s.end_txn(TX, PID, EPOCH, True, TV0, 1) == Answer(CC)


@pytest.mark.parametrize("state", STATES)
def test_another_producer_id_is_not_this_transaction(state: TxnState) -> None:
    s = shard(meta(state))
    assert s.add_partitions(TX, PID + 1, EPOCH, frozenset({P1}), 1) == Answer(
        E.invalid_producer_id_mapping
    )
    assert s.end_txn(TX, PID + 1, EPOCH, True, TV0, 1) == Answer(E.invalid_producer_id_mapping)
    assert s.verify_partitions(TX, PID + 1, EPOCH, [P0]) == {P0: E.invalid_producer_id_mapping}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("epoch", [EPOCH - 1, EPOCH + 1])
def test_another_epoch_is_fenced(state: TxnState, epoch: int) -> None:
    s = shard(meta(state))
    assert s.add_partitions(TX, PID, epoch, frozenset({P1}), 1) == Answer(E.producer_fenced)
    assert s.end_txn(TX, PID, epoch, True, TV0, 1) == Answer(E.producer_fenced)
    assert s.verify_partitions(TX, PID, epoch, [P0]) == {P0: E.producer_fenced}


# -- ported cases -------------------------------------------------------------------------


def test_invalid_request_when_transactional_id_is_empty() -> None:
    s = shard()
    assert s.init_producer_id("", 1000, None, 1) == Answer(E.invalid_request)
    assert s.add_partitions("", PID, EPOCH, frozenset({P0}), 1) == Answer(E.invalid_request)
    assert s.add_partitions(None, PID, EPOCH, frozenset({P0}), 1) == Answer(E.invalid_request)
    assert s.end_txn("", PID, EPOCH, True, TV0, 1) == Answer(E.invalid_request)
    assert s.end_txn(None, PID, EPOCH, True, TV2, 1) == Answer(E.invalid_request)
    assert s.verify_partitions("", PID, EPOCH, [P0]) == {P0: E.invalid_request}


def test_null_transactional_id_gets_a_fresh_producer_id_at_epoch_zero() -> None:
    assert shard().init_producer_id(None, 1000, None, 1) == Answer(E.none, 100, 0)


def test_new_transactional_id_starts_at_epoch_zero() -> None:
    s = shard()
    w = write(s.init_producer_id(TX, 1000, None, 7))
    assert (w.transit.producer_id, w.transit.producer_epoch, w.after) == (
        100,
        0,
        After.INIT_PRODUCER_ID,
    )
    assert s.written(w, 7).answer == Answer(E.none, 100, 0)
    assert s.txns[TX].state == S.EMPTY


def test_timeout_must_be_positive_and_within_the_maximum() -> None:
    s = shard()
    for bad in (0, -1, 900001):
        assert s.init_producer_id(TX, bad, None, 1) == Answer(E.invalid_transaction_timeout)
    assert isinstance(s.init_producer_id(TX, 900000, None, 1), Write)


def test_no_producer_id_at_hand_is_retriable() -> None:
    def none_left() -> int:
        raise ProducerIdsUnavailable

    s = TransactionShard(0, CoordinatorConfig(), none_left)
    assert s.init_producer_id(TX, 1000, None, 1) == Answer(E.coordinator_load_in_progress)
    assert s.init_producer_id(None, 1000, None, 1) == Answer(E.coordinator_load_in_progress)


def test_unknown_transactional_id_is_an_invalid_mapping() -> None:
    s = shard()
    assert s.add_partitions(TX, PID, EPOCH, frozenset({P0}), 1) == Answer(
        E.invalid_producer_id_mapping
    )
    assert s.end_txn(TX, PID, EPOCH, True, TV2, 1) == Answer(E.invalid_producer_id_mapping)
    assert s.verify_partitions(TX, PID, EPOCH, [P0]) == {P0: E.invalid_producer_id_mapping}


def test_verify_names_each_partition() -> None:
    s = shard(meta(S.ONGOING))
    got = s.verify_partitions(TX, PID, EPOCH, [P0, ("topic2", 0)])
    assert got == {P0: E.none, ("topic2", 0): E.transaction_abortable}


def test_verify_ignores_a_pending_move() -> None:
    s = shard(meta(S.ONGOING, pending_state=S.PREPARE_COMMIT))
    assert s.verify_partitions(TX, PID, EPOCH, [P0, P1]) == {
        P0: E.none,
        P1: E.transaction_abortable,
    }


def test_generate_new_producer_id_when_epochs_are_exhausted() -> None:
    s = shard(meta(S.EMPTY, producer_epoch=MAX_EPOCH - 1))
    w = write(s.init_producer_id(TX, 1000, None, 1))
    assert (w.transit.producer_id, w.transit.producer_epoch) == (100, 0)
    assert w.transit.last_producer_epoch == -1  # no expected epoch: none recorded
    s.written(w, 1)
    assert (s.txns[TX].producer_id, s.txns[TX].prev_producer_id) == (100, PID)


def test_init_with_current_epoch_bumps_and_keeps_the_last() -> None:
    s = shard(meta(S.EMPTY))
    w = write(s.init_producer_id(TX, 1000, (PID, EPOCH), 1))
    assert (w.transit.producer_epoch, w.transit.last_producer_epoch) == (EPOCH + 1, EPOCH)
    s.written(w, 1)
    # the retry of that call, whose answer was lost, gets the same epoch
    w2 = write(s.init_producer_id(TX, 1000, (PID, EPOCH), 2))
    assert (w2.transit.producer_epoch, w2.transit.last_producer_epoch) == (EPOCH + 1, EPOCH)


def test_init_with_a_stale_epoch_is_fenced() -> None:
    s = shard(meta(S.EMPTY, last_producer_epoch=EPOCH - 1))
    assert s.init_producer_id(TX, 1000, (PID, EPOCH - 3), 1) == Answer(E.producer_fenced)


def test_init_naming_another_producer_id_is_fenced() -> None:
    s = shard(meta(S.EMPTY))
    assert s.init_producer_id(TX, 1000, (PID + 7, EPOCH), 1) == Answer(E.producer_fenced)


def test_init_with_no_last_producer_data_is_a_new_producer() -> None:
    s = shard()
    w = write(s.init_producer_id(TX, 1000, (PID, EPOCH), 1))  # state just made: epoch -1
    assert (w.transit.producer_id, w.transit.producer_epoch) == (100, 0)


def test_retry_of_init_after_producer_id_rotation() -> None:
    s = shard(meta(S.EMPTY, producer_epoch=MAX_EPOCH - 1))
    w = write(s.init_producer_id(TX, 1000, (PID, MAX_EPOCH - 1), 1))
    assert (w.transit.producer_id, w.transit.last_producer_epoch) == (100, MAX_EPOCH - 1)
    s.written(w, 1)
    # the producer lost the answer and asks again with its old id and epoch
    w2 = write(s.init_producer_id(TX, 1000, (PID, MAX_EPOCH - 1), 2))
    assert (w2.transit.producer_id, w2.transit.producer_epoch) == (100, 0)


def test_invalid_epoch_after_producer_id_rotation_is_fenced() -> None:
    s = shard(meta(S.EMPTY, producer_epoch=MAX_EPOCH - 1))
    s.written(write(s.init_producer_id(TX, 1000, (PID, MAX_EPOCH - 1), 1)), 1)
    assert s.init_producer_id(TX, 1000, (PID, MAX_EPOCH - 2), 2) == Answer(E.producer_fenced)


def test_init_during_a_transaction_fences_aborts_and_asks_for_a_retry() -> None:
    s = shard(meta(S.ONGOING), version=TV0)
    w = write(s.init_producer_id(TX, 1000, None, 100))
    assert (w.after, w.transit.state, w.transit.producer_epoch) == (
        After.FENCE_ABORT,
        S.PREPARE_ABORT,
        EPOCH + 1,
    )
    out = s.written(w, 100)
    assert out.answer == Answer(CC)
    assert out.markers is not None and not out.markers.commit
    assert (out.markers.producer_epoch, out.markers.partitions) == (EPOCH + 1, frozenset({P0}))
    # the old producer is fenced everywhere from now
    assert s.add_partitions(TX, PID, EPOCH, frozenset({P1}), 101) == Answer(E.producer_fenced)
    s.written(out.markers.complete, 102)
    assert s.txns[TX].state == S.COMPLETE_ABORT
    w2 = write(s.init_producer_id(TX, 1000, None, 103))
    assert w2.transit.producer_epoch == EPOCH + 2
    assert s.written(w2, 103).answer == Answer(E.none, PID, EPOCH + 2)


def test_a_failed_fence_write_does_not_bump_twice() -> None:
    s = shard(meta(S.ONGOING), version=TV0)
    w = write(s.init_producer_id(TX, 1000, None, 100))
    assert s.write_failed(w, E.coordinator_not_available) == Answer(E.coordinator_not_available)
    assert s.txns[TX].has_failed_epoch_fence
    w2 = write(s.init_producer_id(TX, 1000, None, 101))
    assert w2.transit.producer_epoch == EPOCH + 1


def test_fence_under_tv2_bumps_for_the_fence_and_for_the_end() -> None:
    s = shard(meta(S.ONGOING), version=TV2)
    w = write(s.init_producer_id(TX, 1000, None, 100))
    assert (w.transit.producer_epoch, w.transit.last_producer_epoch) == (EPOCH + 2, EPOCH + 1)


def test_fence_uses_a_new_producer_id_when_epochs_run_out() -> None:
    s = shard(meta(S.ONGOING, producer_epoch=MAX_EPOCH - 2), version=TV0)
    out = s.written(write(s.init_producer_id(TX, 1000, None, 1)), 1)
    assert out.markers is not None
    s.written(out.markers.complete, 2)
    w = write(s.init_producer_id(TX, 1000, None, 3))
    assert (w.transit.producer_id, w.transit.producer_epoch) == (100, 0)


# -- EndTxn -------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_v0_commits_or_aborts_at_the_same_epoch(commit: bool) -> None:
    s = shard(meta(S.ONGOING))
    w = write(s.end_txn(TX, PID, EPOCH, commit, TV0, 200))
    assert w.transit.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    out = s.written(w, 200)
    assert out.answer == Answer(E.none)  # EndTxn before v5 carries no producer id or epoch
    assert isinstance(out.markers, Markers)
    assert (out.markers.commit, out.markers.producer_epoch) == (commit, EPOCH)
    assert out.markers.coordinator_epoch == 3
    assert s.txns[TX].pending_state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert s.written(out.markers.complete, 201).answer is None
    m = s.txns[TX]
    assert (m.state, m.partitions, m.producer_epoch) == (
        S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT,
        set(),
        EPOCH,
    )


def test_end_txn_v2_bumps_the_epoch_and_answers_the_new_one() -> None:
    s = shard(meta(S.ONGOING, tv=TV2))
    w = write(s.end_txn(TX, PID, EPOCH, True, TV2, 200))
    assert (w.transit.producer_epoch, w.transit.last_producer_epoch) == (EPOCH + 1, EPOCH)
    out = s.written(w, 200)
    assert out.answer == Answer(E.none, PID, EPOCH + 1)
    assert out.markers is not None and out.markers.producer_epoch == EPOCH + 1
    # a retry with the old epoch while markers are written: wait
    assert s.end_txn(TX, PID, EPOCH, True, TV2, 201) == Answer(CC)
    s.written(out.markers.complete, 202)
    # a retry after completion: answered as the first time
    assert s.end_txn(TX, PID, EPOCH, True, TV2, 203) == Answer(E.none, PID, EPOCH + 1)
    # but a commit at the new epoch with no transaction open is an invalid state
    assert s.end_txn(TX, PID, EPOCH + 1, True, TV2, 204) == Answer(E.invalid_txn_state)


def test_end_txn_v2_an_older_epoch_that_is_not_a_retry_is_fenced() -> None:
    s = shard(meta(S.COMPLETE_COMMIT, tv=TV2))
    assert s.end_txn(TX, PID, EPOCH - 2, True, TV2, 1) == Answer(E.producer_fenced)
    assert s.end_txn(TX, PID, EPOCH + 1, True, TV2, 1) == Answer(E.producer_fenced)


# Kafka 4's table for transaction version 2 (TransactionCoordinator.scala): the retry
# carries the epoch below the stored one; "bump" is a write of PrepareAbort at epoch + 1.
PF, ITS, NONE = E.producer_fenced, E.invalid_txn_state, E.none
TV2_TABLE = {
    # state: (abort retry, abort current, commit retry, commit current)
    S.EMPTY: (PF, S.PREPARE_ABORT, PF, ITS),
    S.COMPLETE_ABORT: (NONE, S.PREPARE_ABORT, ITS, ITS),
    S.COMPLETE_COMMIT: (ITS, S.PREPARE_ABORT, NONE, ITS),
    S.ONGOING: (PF, S.PREPARE_ABORT, PF, S.PREPARE_COMMIT),
    S.PREPARE_ABORT: (CC, PF, ITS, PF),
    S.PREPARE_COMMIT: (ITS, PF, CC, PF),
}


@pytest.mark.parametrize("state", list(TV2_TABLE))
def test_end_txn_v2_table(state: TxnState) -> None:
    want = TV2_TABLE[state]
    got = []
    for commit in (False, True):
        for epoch in (EPOCH - 1, EPOCH):  # retry, current
            d = shard(meta(state, tv=TV2)).end_txn(TX, PID, epoch, commit, TV2, 1000)
            got.append(_outcome(d))
    assert tuple(got) == want


def test_end_txn_v2_abort_with_nothing_open_completes_with_no_markers_to_write() -> None:
    s = shard(meta(S.COMPLETE_COMMIT, tv=TV2))
    w = write(s.end_txn(TX, PID, EPOCH, False, TV2, 777))
    assert (w.transit.producer_epoch, w.transit.txn_start_ms) == (EPOCH + 1, 777)
    out = s.written(w, 777)
    assert out.answer == Answer(E.none, PID, EPOCH + 1)
    assert out.markers is not None and out.markers.partitions == frozenset()
    s.written(out.markers.complete, 778)
    assert (s.txns[TX].state, s.txns[TX].producer_epoch) == (S.COMPLETE_ABORT, EPOCH + 1)
    # and its retry is answered as the first time
    assert s.end_txn(TX, PID, EPOCH, False, TV2, 779) == Answer(E.none, PID, EPOCH + 1)


def test_end_txn_v2_overflow_rotates_the_producer_id() -> None:
    s = shard(meta(S.ONGOING, tv=TV2, producer_epoch=MAX_EPOCH - 1))
    w = write(s.end_txn(TX, PID, MAX_EPOCH - 1, True, TV2, 1))
    assert w.transit.next_producer_id == 100
    out = s.written(w, 1)
    assert out.markers is not None and out.markers.producer_epoch == MAX_EPOCH
    s.written(out.markers.complete, 2)
    m = s.txns[TX]
    assert (m.producer_id, m.producer_epoch, m.prev_producer_id) == (100, 0, PID)
    # the retry of that EndTxn with the old id and epoch is answered OK
    assert s.end_txn(TX, PID, MAX_EPOCH - 1, True, TV2, 3) == Answer(E.none, 100, 0)


def test_end_txn_v1_epoch_must_be_equal() -> None:
    s = shard(meta(S.ONGOING))
    assert s.end_txn(TX, PID, EPOCH + 1, True, TV0, 1) == Answer(E.producer_fenced)
    assert s.end_txn(TX, PID, EPOCH - 1, True, TV0, 1) == Answer(E.producer_fenced)


def test_a_failed_end_write_changes_nothing() -> None:
    s = shard(meta(S.ONGOING, tv=TV2))
    w = write(s.end_txn(TX, PID, EPOCH, True, TV2, 1))
    assert s.write_failed(w, E.not_coordinator) == Answer(E.not_coordinator)
    m = s.txns[TX]
    assert (m.state, m.producer_epoch, m.pending_state) == (S.ONGOING, EPOCH, None)
    assert isinstance(s.end_txn(TX, PID, EPOCH, True, TV2, 2), Write)


# -- AddPartitions ------------------------------------------------------------------------


def test_add_partitions_starts_the_clock_of_a_new_transaction_only() -> None:
    s = shard(meta(S.COMPLETE_COMMIT))
    w = write(s.add_partitions(TX, PID, EPOCH, frozenset({P1}), 500))
    assert w.transit.txn_start_ms == 500
    assert s.written(w, 500).answer == Answer(E.none)
    w2 = write(s.add_partitions(TX, PID, EPOCH, frozenset({P0}), 600))
    assert (w2.transit.txn_start_ms, w2.transit.partitions) == (500, frozenset({P0, P1}))
    s.written(w2, 600)
    assert s.txns[TX].partitions == {P0, P1}


def test_a_partition_is_in_the_transaction_only_once_durable() -> None:
    s = shard(meta(S.EMPTY))
    w = write(s.add_partitions(TX, PID, EPOCH, frozenset({P1}), 1))
    assert s.verify_partitions(TX, PID, EPOCH, [P1]) == {P1: E.transaction_abortable}
    s.written(w, 1)
    assert s.verify_partitions(TX, PID, EPOCH, [P1]) == {P1: E.none}


# -- time, failover, expiry ----------------------------------------------------------------


def test_timed_out_transactions_are_aborted_under_a_bumped_epoch() -> None:
    asyncio.run(_timed_out())


async def _timed_out() -> None:
    clock = ManualClock()
    t0 = clock.wall_ms()
    s = shard(meta(S.ONGOING, txn_start_ms=t0, txn_timeout_ms=1000), version=TV0)
    assert s.next_deadline_ms() == t0 + 1000
    await clock.advance(1.0)
    assert s.abort_timed_out(clock.wall_ms()) == []  # Kafka: strictly older than the timeout
    await clock.advance(0.001)
    ws = s.abort_timed_out(clock.wall_ms())
    assert [(w.after, w.transit.state, w.transit.producer_epoch) for w in ws] == [
        (After.TIMEOUT_ABORT, S.PREPARE_ABORT, EPOCH + 1)
    ]
    assert s.next_deadline_ms() is None  # pending: not timed out twice
    out = s.written(ws[0], clock.wall_ms())
    assert out.answer is None and out.markers is not None and not out.markers.commit
    # the producer that left it is fenced
    assert s.end_txn(TX, PID, EPOCH, True, TV0, clock.wall_ms()) == Answer(E.producer_fenced)


def test_a_pending_transaction_does_not_time_out() -> None:
    s = shard(meta(S.ONGOING, txn_start_ms=0, pending_state=S.PREPARE_COMMIT))
    assert s.abort_timed_out(10**9) == []


def test_a_failed_timeout_abort_is_retried_without_a_second_bump() -> None:
    s = shard(meta(S.ONGOING, txn_start_ms=0), version=TV0)
    (w,) = s.abort_timed_out(5000)
    assert s.write_failed(w, E.coordinator_not_available) is None
    (w2,) = s.abort_timed_out(6000)
    assert w2.transit.producer_epoch == EPOCH + 1


def test_a_new_coordinator_finishes_what_its_predecessor_prepared() -> None:
    s = TransactionShard(
        9,
        CoordinatorConfig(),
        lambda: 1,
        [
            meta(S.PREPARE_COMMIT),
            TransactionMetadata("other", 11, producer_epoch=0, state=S.ONGOING, partitions={P1}),
        ],
    )
    (m,) = s.loaded(1)
    assert (m.transactional_id, m.commit, m.coordinator_epoch) == (TX, True, 9)
    s.written(m.complete, 2)
    assert s.txns[TX].state == S.COMPLETE_COMMIT


def test_a_deleted_partition_needs_no_marker() -> None:
    s = shard(meta(S.PREPARE_ABORT, partitions={P0, P1}))
    s.markers_partition_gone(TX, P1)
    (m,) = s.loaded(1)
    assert m.partitions == frozenset({P0})


def test_idle_ids_expire_and_open_ones_do_not() -> None:
    exp = CoordinatorConfig().id_expiration_ms
    s = shard(
        meta(S.COMPLETE_COMMIT, txn_last_update_ms=0),
        TransactionMetadata("busy", 11, producer_epoch=0, state=S.ONGOING, txn_last_update_ms=0),
    )
    assert s.expire_ids(exp - 1) == []
    (w,) = s.expire_ids(exp)
    assert (w.transactional_id, w.transit.state) == (TX, S.DEAD)
    assert s.init_producer_id(TX, 1000, None, exp) == Answer(CC)  # being expired
    s.written(w, exp)
    assert TX not in s.txns
    assert write(s.init_producer_id(TX, 1000, None, exp)).transit.producer_epoch == 0


# -- DescribeTransactions, ListTransactions (KIP-664) ------------------------------------


def test_describe_names_state_partitions_and_times() -> None:
    s = shard(meta(S.ONGOING, partitions={P0, P1}))
    d = s.describe(TX)
    assert (d.error, d.state, d.producer_id, d.producer_epoch) == (E.none, "Ongoing", PID, EPOCH)
    assert (d.timeout_ms, d.start_ms, d.partitions) == (1000, 50, frozenset({P0, P1}))
    assert s.describe("nope").error == E.transactional_id_not_found
    assert s.describe("").error == E.invalid_request


def test_list_filters_by_producer_state_and_duration() -> None:
    s = shard(
        meta(S.ONGOING, txn_start_ms=0),
        TransactionMetadata("b", 11, producer_epoch=0, state=S.COMPLETE_COMMIT, txn_start_ms=900),
        TransactionMetadata("c", 12, producer_epoch=0, state=S.EMPTY),
    )

    def ids(pids: list[int], states: list[str], dur: int = -1) -> list[str]:
        listed, _ = s.list_transactions(pids, states, dur, 1000)
        return sorted(t.transactional_id for t in listed)

    assert ids([], []) == ["b", "c", TX]
    assert ids([11, 12], []) == ["b", "c"]
    assert ids([], ["Ongoing", "Empty"]) == ["c", TX]
    assert ids([], [], 500) == ["c", TX]  # open longer than 500 ms (c never started: -1)
    assert ids([], [], 1000) == ["c"]  # strictly longer
    listed, unknown = s.list_transactions([], ["Ongoing", "Stable"], -1, 1000)
    assert [t.state for t in listed] == ["Ongoing"] and unknown == ["Stable"]
    assert s.list_transactions([], ["Stable"], -1, 1000) == ([], ["Stable"])


def test_a_failed_completion_write_is_prepared_again() -> None:
    s = shard(meta(S.ONGOING), version=TV0)
    out = s.written(write(s.end_txn(TX, PID, EPOCH, True, TV0, 1)), 1)
    assert out.markers is not None
    assert s.complete_again(TX, 2) is None  # its completion is still pending
    assert s.write_failed(out.markers.complete, E.coordinator_not_available) is None
    again = s.complete_again(TX, 3)
    assert again is not None and again.transit.state == S.COMPLETE_COMMIT
    s.written(again, 3)
    assert s.txns[TX].state == S.COMPLETE_COMMIT
    assert s.complete_again(TX, 4) is None  # nothing left to complete
