"""The transaction state table walked exhaustively: every move it allows is prepared, every
other is refused as a bug; the ids and names are Kafka's."""

from __future__ import annotations

import itertools

import pytest

from zonegate.transactions.metadata import TransactionMetadata
from zonegate.transactions.states import (
    MAX_EPOCH,
    VALID_PREVIOUS,
    IllegalTransition,
    TransactionVersion,
    TxnState,
    is_epoch_exhausted,
    java_string_hash,
    may_move,
    shard_for,
)

pytestmark = pytest.mark.unit

KAFKA = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}


def test_ids_and_names_are_kafkas() -> None:
    assert {s.value: s.kafka_name for s in TxnState} == KAFKA
    for s in TxnState:
        assert TxnState.from_kafka_name(s.kafka_name) is s
    assert TxnState.from_kafka_name("Stable") is None


def test_every_state_has_a_row() -> None:
    assert set(VALID_PREVIOUS) == set(TxnState)


def _prepare(meta: TransactionMetadata, dst: TxnState) -> None:
    """Reach `dst` through the one prepare that leads to it."""
    if dst == TxnState.EMPTY:
        meta.prepare_increment_producer_epoch(1000, None, 1)
    elif dst == TxnState.ONGOING:
        meta.prepare_add_partitions(frozenset({("t", 0)}), 1)
    elif dst in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        meta.prepare_abort_or_commit(dst, TransactionVersion.TV_0, -1, 1)
    elif dst in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        # prepare_complete picks the completion from the state it is in
        meta.prepare_complete(1)
    elif dst == TxnState.DEAD:
        meta.prepare_dead()
    else:
        meta.prepare_fence_producer_epoch()


def _expressible(src: TxnState, dst: TxnState) -> bool:
    """prepare_complete aims at the completion of the state it is in (abort but from
    PrepareCommit), so a move from PrepareCommit to CompleteAbort, or from any other state
    to CompleteCommit, cannot even be asked for."""
    if dst == TxnState.COMPLETE_COMMIT:
        return src == TxnState.PREPARE_COMMIT
    if dst == TxnState.COMPLETE_ABORT:
        return src != TxnState.PREPARE_COMMIT
    return True


PAIRS = [(s, d) for s, d in itertools.product(TxnState, TxnState) if _expressible(s, d)]


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_the_table_is_the_only_way(src: TxnState, dst: TxnState) -> None:
    meta = TransactionMetadata("tx", 7, producer_epoch=3, state=src, txn_start_ms=0)
    if may_move(src, dst):
        _prepare(meta, dst)
        assert meta.pending_state == dst
    else:
        with pytest.raises(IllegalTransition):
            _prepare(meta, dst)
        assert meta.pending_state is None


def test_a_second_prepare_while_one_is_pending_is_a_bug() -> None:
    meta = TransactionMetadata("tx", 7, producer_epoch=3)
    meta.prepare_add_partitions(frozenset({("t", 0)}), 1)
    with pytest.raises(IllegalTransition):
        meta.prepare_add_partitions(frozenset({("t", 1)}), 2)


def test_epoch_exhaustion_leaves_room_for_one_fence() -> None:
    assert not is_epoch_exhausted(MAX_EPOCH - 2)
    assert is_epoch_exhausted(MAX_EPOCH - 1)
    assert is_epoch_exhausted(MAX_EPOCH)


def test_only_version_two_bumps_at_every_end() -> None:
    assert [v.supports_epoch_bump for v in TransactionVersion] == [False, False, True]


# Values printed by Java 21's "...".hashCode() (and Math.abs(h) % 50 beside them):
# "polygenelubricants" hashes to Integer.MIN_VALUE, whose Math.abs is negative, which is
# why Kafka's Utils.abs maps it to 0.
@pytest.mark.parametrize(
    ("s", "h", "shard"),
    [
        ("", 0, 0),
        ("a", 97, 47),
        ("ab", 3105, 5),
        ("hello", 99162322, 22),
        ("polygenelubricants", -(1 << 31), 0),
        ("golden-tx", -1280132664, 14),
        ("\U0001f600", 1772899, 49),  # a surrogate pair: two UTF-16 code units
    ],
)
def test_java_string_hash_and_kafkas_partition_for(s: str, h: int, shard: int) -> None:
    assert java_string_hash(s) == h
    assert shard_for(s, 50) == shard
