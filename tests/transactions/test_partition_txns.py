"""A partition's transaction rules as its leader applies them: the LSO, the aborted index,
fencing by producer and coordinator epoch, and KIP-890's verification guard (cases after
Kafka's ProducerStateManagerTest and UnifiedLog's verification tests), then a seeded random
walk checked against a model that keeps every batch."""

from __future__ import annotations

import random

import pytest
from kio.schema.errors import ErrorCode as E

from zonegate.transactions.partition_txns import (
    UNVERIFIED,
    AbortedTxn,
    PartitionTxns,
    ProducerTxn,
)

pytestmark = pytest.mark.unit

A, B = 1000, 2000  # producer ids


def verified(p: PartitionTxns, pid: int, epoch: int = 0, seq: int = 0) -> int:
    assert p.needs_verification(pid, epoch, transactional=True)
    return p.begin_verification(pid, epoch, seq, 0)


def txn_batch(
    p: PartitionTxns, pid: int, offset: int, epoch: int = 0, seq: int = 0, guard: int | None = None
) -> E:
    c = p.cycle()
    err = c.data_batch(pid, epoch, seq, True, offset, 0, guard)
    if err == E.none:
        p.apply(c)
    return err


def marker(p: PartitionTxns, pid: int, offset: int, commit: bool, epoch: int = 0, ce: int = 0) -> E:
    c = p.cycle()
    out = c.marker(pid, epoch, ce, commit, offset, 0)
    if out.error == E.none:
        p.apply(c)
    return out.error


def test_no_transaction_means_the_lso_is_the_high_watermark() -> None:
    p = PartitionTxns()
    assert p.last_stable_offset(42) == 42
    c = p.cycle()
    assert c.data_batch(A, 0, 0, False, 0, 0) == E.none  # idempotent, not transactional
    p.apply(c)
    assert p.last_stable_offset(43) == 43


def test_an_open_transaction_holds_the_lso_at_its_first_offset() -> None:
    p = PartitionTxns()
    assert txn_batch(p, A, 5, guard=verified(p, A)) == E.none
    assert not p.needs_verification(A, 0, True)  # its next batches go straight in
    assert txn_batch(p, A, 9, seq=1) == E.none
    assert p.last_stable_offset(10) == 5
    assert txn_batch(p, B, 10, guard=verified(p, B)) == E.none
    assert p.last_stable_offset(11) == 5
    assert marker(p, A, 11, commit=True) == E.none
    assert p.last_stable_offset(12) == 10  # B's transaction is still open
    assert marker(p, B, 12, commit=True) == E.none
    assert p.last_stable_offset(13) == 13
    assert p.aborted == []  # commits leave no index entries


def test_an_abort_adds_an_index_entry_with_the_lso_after_it() -> None:
    p = PartitionTxns()
    txn_batch(p, A, 0, guard=verified(p, A))
    txn_batch(p, B, 3, guard=verified(p, B))
    assert marker(p, A, 6, commit=False) == E.none
    assert p.aborted == [AbortedTxn(A, 0, 6, 3)]  # B's open transaction bounds the LSO
    assert marker(p, B, 7, commit=False) == E.none
    assert p.aborted[-1] == AbortedTxn(B, 3, 7, 8)  # nothing else open: past the marker


def test_a_marker_of_an_empty_transaction_indexes_nothing() -> None:
    p = PartitionTxns()
    assert marker(p, A, 0, commit=False) == E.none
    assert p.aborted == []
    assert p.producers[A].txn_first_offset is None


def test_aborted_in_range_names_the_transactions_meeting_the_range() -> None:
    p = PartitionTxns.load(
        [], [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 30, 40, 41)]
    )

    def ids(lo: int, hi: int) -> list[int]:
        return [a.producer_id for a in p.aborted_in_range(lo, hi)]

    assert ids(0, 100) == [1, 2, 3]
    assert ids(11, 30) == [2]  # 1 ended before, 3 starts at the upper bound
    assert ids(10, 31) == [1, 2, 3]
    assert ids(41, 100) == []
    p.drop_aborted_below(21)
    assert [a.producer_id for a in p.aborted] == [3]


def test_read_committed_answers_up_to_the_lso_with_the_aborted_of_the_range() -> None:
    p = PartitionTxns()
    txn_batch(p, A, 0, guard=verified(p, A))  # offsets 0-1 in one entry
    marker(p, A, 2, commit=False)
    txn_batch(p, B, 3, guard=verified(p, B))  # B's transaction stays open
    spans = [(0, 1), (2, 2), (3, 3)]
    keep, lso, aborted = p.read_committed(spans, 0, 4)
    assert (keep, lso) == (2, 3)
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(A, 0)]
    keep, lso, aborted = p.read_committed(spans[2:], 3, 4)
    assert (keep, lso, aborted) == (0, 3, [])  # nothing stable yet from offset 3
    marker(p, B, 4, commit=True)
    keep, lso, aborted = p.read_committed([(3, 3), (4, 4)], 3, 5)
    assert (keep, lso, aborted) == (2, 5, [])  # A's abort ended before this range


def test_a_plain_write_inside_a_transaction_is_refused() -> None:
    p = PartitionTxns()
    txn_batch(p, A, 0, guard=verified(p, A))
    c = p.cycle()
    assert c.data_batch(A, 0, 1, False, 1, 0) == E.invalid_txn_state


def test_a_first_transactional_batch_without_verification_is_refused() -> None:
    p = PartitionTxns()
    assert txn_batch(p, A, 0) == E.invalid_txn_state
    assert txn_batch(p, A, 0, guard=12345) == E.invalid_txn_state  # someone else's guard
    assert p.last_stable_offset(1) == 1  # nothing opened


def test_a_marker_during_verification_makes_the_guard_stale() -> None:
    """Kafka's ABA case: verified for a transaction that then ended; the late batch
    must not open a transaction the coordinator knows nothing of (a hanging one)."""
    p = PartitionTxns()
    g = verified(p, A)
    assert marker(p, A, 0, commit=False) == E.none
    assert txn_batch(p, A, 1, guard=g) == E.invalid_txn_state
    g2 = verified(p, A)
    assert g2 != g
    assert txn_batch(p, A, 1, guard=g2) == E.none


def test_a_verification_begun_while_a_marker_commits_is_dropped_too() -> None:
    p = PartitionTxns()
    c = p.cycle()
    assert c.marker(A, 0, 0, False, 0, 0).error == E.none
    g = p.begin_verification(A, 0, 0, 0)  # while the cycle's commit is in flight
    p.apply(c)
    assert txn_batch(p, A, 1, guard=g) == E.invalid_txn_state


def test_a_guard_is_used_once() -> None:
    p = PartitionTxns()
    g = verified(p, A)
    assert txn_batch(p, A, 0, guard=g) == E.none
    assert marker(p, A, 1, commit=True) == E.none
    assert txn_batch(p, A, 2, guard=g) == E.invalid_txn_state


def test_a_later_batch_cannot_overtake_the_first_one_being_verified() -> None:
    p = PartitionTxns()
    g = p.begin_verification(A, 0, 5, 0)
    assert p.begin_verification(A, 0, 3, 0) == g  # the same verification, lower sequence
    assert txn_batch(p, A, 0, seq=5, guard=g) == E.out_of_order_sequence_number
    assert txn_batch(p, A, 0, seq=3, guard=g) == E.none


def test_a_newer_epoch_starts_a_new_verification() -> None:
    p = PartitionTxns()
    g = p.begin_verification(A, 0, 0, 0)
    g1 = p.begin_verification(A, 1, 0, 0)
    assert g1 != g
    assert txn_batch(p, A, 0, epoch=1, guard=g) == E.invalid_txn_state
    assert txn_batch(p, A, 0, epoch=1, guard=g1) == E.none


def test_an_older_producer_epoch_is_fenced() -> None:
    p = PartitionTxns()
    txn_batch(p, A, 0, epoch=3, guard=p.begin_verification(A, 3, 0, 0))
    assert txn_batch(p, A, 1, epoch=2) == E.invalid_producer_epoch
    assert marker(p, A, 1, commit=True, epoch=2) == E.invalid_producer_epoch


def test_tv2_marker_with_the_bumped_epoch_fences_the_zombie() -> None:
    """KIP-890 part 2: the EndTxn bump reaches the partition with the marker, so a late
    write of the ended transaction (the producer's old epoch) cannot start another."""
    p = PartitionTxns()
    txn_batch(p, A, 0, epoch=4, guard=p.begin_verification(A, 4, 0, 0))
    assert marker(p, A, 1, commit=True, epoch=5) == E.none
    g = p.begin_verification(A, 4, 1, 0)  # the zombie even gets a guard
    assert txn_batch(p, A, 2, epoch=4, seq=1, guard=g) == E.invalid_producer_epoch


def test_the_next_transaction_waits_for_the_marker_of_the_last() -> None:
    """Under TV2 the producer's next transaction (epoch + 1) may reach a partition before
    the marker of the last one: it must be verified, and cannot join the open one."""
    p = PartitionTxns()
    txn_batch(p, A, 0, epoch=4, guard=p.begin_verification(A, 4, 0, 0))
    assert not p.needs_verification(A, 4, True)
    assert p.needs_verification(A, 5, True)
    assert txn_batch(p, A, 1, epoch=5, seq=0) == E.invalid_txn_state
    g = p.begin_verification(A, 5, 0, 0)  # even with a guard, never merged
    assert txn_batch(p, A, 1, epoch=5, seq=0, guard=g) == E.invalid_txn_state
    assert marker(p, A, 1, commit=True, epoch=5) == E.none
    g = p.begin_verification(A, 5, 0, 0)
    assert txn_batch(p, A, 2, epoch=5, seq=0, guard=g) == E.none
    assert p.last_stable_offset(3) == 2


def test_a_deposed_coordinators_marker_is_fenced() -> None:
    p = PartitionTxns()
    txn_batch(p, A, 0, guard=verified(p, A))
    assert marker(p, A, 1, commit=False, ce=7) == E.none
    txn_batch(p, A, 2, guard=verified(p, A))
    assert marker(p, A, 3, commit=True, ce=6) == E.transaction_coordinator_fenced
    assert p.last_stable_offset(4) == 2  # still open
    assert marker(p, A, 3, commit=True, ce=7) == E.none


def test_a_cycle_that_is_not_applied_changes_nothing() -> None:
    p = PartitionTxns()
    g = verified(p, A)
    c = p.cycle()
    assert c.data_batch(A, 0, 0, True, 0, 0, g) == E.none
    assert c.data_batch(A, 0, 1, False, 1, 0) == E.invalid_txn_state  # sees its own change
    # the commit failed: not applied
    assert p.last_stable_offset(1) == 1
    assert txn_batch(p, A, 0, guard=g) == E.none  # the guard is still good


def test_expiry_keeps_open_transactions() -> None:
    p = PartitionTxns.load([ProducerTxn(A, 0, -1, 5, 0), ProducerTxn(B, 0, -1, None, 0)], [])
    p.begin_verification(B, 0, 0, 0)
    p.expire(10_000, producer_expiration_ms=10_000)
    assert set(p.producers) == {A} and p.verifications == {}
    assert p.open_transactions() == [ProducerTxn(A, 0, -1, 5, 0)]


def test_expiry_counts_a_loaded_producer_from_the_first_sweep() -> None:
    """A new leader loads producers with no time (-1): the first sweep stamps them rather
    than expiring them, the next one past the expiration forgets them."""
    p = PartitionTxns.load([ProducerTxn(A, 0, 3, None), ProducerTxn(B, 0, -1, 5)], [])
    p.expire(1_000_000, producer_expiration_ms=10_000)
    assert p.producers == {
        A: ProducerTxn(A, 0, 3, None, 1_000_000),
        B: ProducerTxn(B, 0, -1, 5, 1_000_000),
    }
    p.expire(1_009_999, producer_expiration_ms=10_000)
    assert set(p.producers) == {A, B}
    p.expire(1_010_000, producer_expiration_ms=10_000)
    assert set(p.producers) == {B}, "the open transaction is kept"


def test_verification_off_opens_a_transaction_unverified() -> None:
    """transaction.partition.verification.enable=false (Produce v11 and older): the batch
    carries the UNVERIFIED guard and opens its transaction with no verification begun;
    without it, the same batch is refused."""
    p = PartitionTxns()
    assert txn_batch(p, A, 4) == E.invalid_txn_state
    assert txn_batch(p, A, 4, guard=UNVERIFIED) == E.none
    assert p.last_stable_offset(6) == 4
    assert marker(p, A, 6, commit=False) == E.none
    assert p.aborted == [AbortedTxn(A, 4, 6, 7)]


@pytest.mark.parametrize("seed", range(20))
def test_random_walk_against_a_model(seed: int) -> None:
    """Producers open, write, commit and abort in random order, some cycles fail; the LSO
    is always the first offset of the earliest open transaction, and the aborted index
    names exactly the aborted transactions a range meets."""
    rnd = random.Random(seed)
    p = PartitionTxns()
    hw = 0
    open_: dict[int, int] = {}  # the model: producer -> first offset
    aborted: list[tuple[int, int, int]] = []  # producer, first, marker offset
    for _ in range(300):
        pid = rnd.choice([1, 2, 3, 4])
        c = p.cycle()
        if rnd.random() < 0.6:
            guard = p.begin_verification(pid, 0, 0, 0) if pid not in open_ else None
            assert c.data_batch(pid, 0, 0, True, hw, 0, guard) == E.none
            fails = rnd.random() < 0.1
            if not fails:
                open_.setdefault(pid, hw)
        else:
            commit = rnd.random() < 0.5
            assert c.marker(pid, 0, 0, commit, hw, 0).error == E.none
            fails = rnd.random() < 0.1
            if not fails:
                first = open_.pop(pid, None)
                if first is not None and not commit:
                    aborted.append((pid, first, hw))
        if fails:
            continue
        p.apply(c)
        hw += 1
        assert p.last_stable_offset(hw) == min(open_.values(), default=hw)
        lo = rnd.randrange(0, hw + 1)
        hi = rnd.randrange(lo, hw + 2)
        want = [(a, f, m) for a, f, m in aborted if m >= lo and f < hi]
        got = [(a.producer_id, a.first_offset, a.last_offset) for a in p.aborted_in_range(lo, hi)]
        assert got == want
