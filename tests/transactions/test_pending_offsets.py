"""Offsets committed in a transaction become the group's only when it commits (KIP-98, KIP-447),
the later of a transactional and a plain commit wins, as Kafka's OffsetMetadataManager."""

from __future__ import annotations

import pytest

from zonegate.transactions.pending_offsets import OffsetBook

pytestmark = pytest.mark.unit

G, T = "g", "t"
PID, OTHER = 7, 8


def test_pending_until_commit() -> None:
    b = OffsetBook()
    b.commit(G, T, 0, 5, 1, "", 1)
    b.txn_commit(PID, G, T, 0, 9, 1, "m", 2)
    before = b.fetch(G, T, 0)
    assert before is not None and before.offset == 5
    assert b.unstable(G, T, 0) and not b.unstable(G, T, 1)
    b.end_transaction(PID, True, [G])
    rec = b.fetch(G, T, 0)
    assert rec is not None and (rec.offset, rec.metadata) == (9, "m")
    assert not b.unstable(G, T, 0) and b.pending == {}


def test_abort_drops_them() -> None:
    b = OffsetBook()
    b.commit(G, T, 0, 5, 1, "", 1)
    b.txn_commit(PID, G, T, 0, 9, 1, "", 2)
    b.end_transaction(PID, False, [G])
    rec = b.fetch(G, T, 0)
    assert rec is not None and rec.offset == 5 and not b.unstable(G, T, 0)


def test_a_later_plain_commit_wins_over_the_transaction() -> None:
    b = OffsetBook()
    b.txn_commit(PID, G, T, 0, 9, 1, "", 1)
    b.commit(G, T, 0, 12, 1, "", 2)  # after the TxnOffsetCommit, before the marker
    b.end_transaction(PID, True, [G])
    rec = b.fetch(G, T, 0)
    assert rec is not None and rec.offset == 12


def test_a_marker_completes_only_its_groups_and_producer() -> None:
    b = OffsetBook()
    b.txn_commit(PID, G, T, 0, 9, 1, "", 1)
    b.txn_commit(PID, "h", T, 0, 3, 1, "", 1)
    b.txn_commit(OTHER, G, T, 1, 4, 1, "", 1)
    b.end_transaction(PID, True, [G])  # the offsets partition holding g, not h
    assert b.fetch(G, T, 0) is not None and b.fetch("h", T, 0) is None
    assert b.unstable("h", T, 0) and b.unstable(G, T, 1)
    b.end_transaction(PID, True, [G])  # a retried marker: nothing left to do
    b.end_transaction(PID, False, ["h"])
    assert not b.unstable("h", T, 0) and b.fetch("h", T, 0) is None


def test_the_last_txn_commit_of_a_partition_in_the_transaction_counts() -> None:
    b = OffsetBook()
    b.txn_commit(PID, G, T, 0, 9, 1, "", 1)
    b.txn_commit(PID, G, T, 0, 11, 1, "", 2)
    b.end_transaction(PID, True, [G])
    rec = b.fetch(G, T, 0)
    assert rec is not None and rec.offset == 11


def test_delete_drops_pending_too() -> None:
    b = OffsetBook()
    b.txn_commit(PID, G, T, 0, 9, 1, "", 1)
    b.txn_commit(PID, G, T, 1, 9, 1, "", 1)
    b.delete(G, T, 0)
    assert not b.unstable(G, T, 0) and b.unstable(G, T, 1)
    b.delete_group(G)
    assert b.pending == {}
    b.end_transaction(PID, True, [G])
    assert b.fetch(G, T, 1) is None
