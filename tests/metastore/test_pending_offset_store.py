"""PendingOffsetStore's contract: offsets committed in a transaction become the group's only
when it commits, the later of a transactional and a plain commit wins. The cases are
tests/transactions/test_pending_offsets.py's (the rule, `OffsetBook`), replayed on every
backend; groups g and h hash to offsets partitions 1 and 2 here."""

from __future__ import annotations

from tests.metastore.backends import Stores
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import CommittedOffset

G, H, T = "g", "h", "t"
PID, OTHER = 7, 8
P = {G: 1, H: 2}  # each group's __consumer_offsets partition


def _o(partition: int, offset: int, metadata: str = "", ms: int = 1) -> CommittedOffset:
    return CommittedOffset(T, partition, offset, 1, metadata, ms)


async def _txn(
    s: MetaStore, pid: int, group: str, partition: int, offset: int, m: str = ""
) -> None:
    await s.txn_commit_offsets(group, pid, P[group], [_o(partition, offset, m, 2)])


async def _offset(s: MetaStore, group: str, partition: int) -> CommittedOffset | None:
    return next((o for o in await s.fetch_offsets(group) if o.partition == partition), None)


async def test_pending_until_commit(store: MetaStore) -> None:
    await store.commit_offsets(G, [_o(0, 5)])
    await _txn(store, PID, G, 0, 9, "m")
    assert await store.fetch_offsets(G) == [_o(0, 5)]
    assert await store.pending_offsets(G) == [(T, 0)]
    await store.complete_txn_offsets(P[G], PID, commit=True)
    assert await store.fetch_offsets(G) == [_o(0, 9, "m", 2)]
    assert await store.pending_offsets(G) == []


async def test_abort_drops_them(store: MetaStore) -> None:
    await store.commit_offsets(G, [_o(0, 5)])
    await _txn(store, PID, G, 0, 9)
    await store.complete_txn_offsets(P[G], PID, commit=False)
    assert await store.fetch_offsets(G) == [_o(0, 5)]
    assert await store.pending_offsets(G) == []


async def test_a_later_plain_commit_wins_over_the_transaction(stores: Stores) -> None:
    a, b = stores.open(), stores.open()
    await _txn(a, PID, G, 0, 9)
    await b.commit_offsets(G, [_o(0, 12)])  # after the TxnOffsetCommit, before the marker
    await a.complete_txn_offsets(P[G], PID, commit=True)
    assert await b.fetch_offsets(G) == [_o(0, 12)]
    # And an earlier plain commit loses to the transaction's.
    await b.commit_offsets(G, [_o(1, 3)])
    await _txn(a, PID, G, 1, 4)
    await b.complete_txn_offsets(P[G], PID, commit=True)
    assert [o.offset for o in await a.fetch_offsets(G)] == [12, 4]


async def test_a_marker_completes_only_its_groups_and_producer(store: MetaStore) -> None:
    await _txn(store, PID, G, 0, 9)
    await _txn(store, PID, H, 0, 3)
    await _txn(store, OTHER, G, 1, 4)
    await store.complete_txn_offsets(P[G], PID, commit=True)  # g's offsets partition
    assert await _offset(store, G, 0) is not None and await store.fetch_offsets(H) == []
    assert await store.pending_offsets(H) == [(T, 0)]
    assert await store.pending_offsets(G) == [(T, 1)]
    await store.complete_txn_offsets(P[G], PID, commit=True)  # a retried marker: nothing left
    assert [o.offset for o in await store.fetch_offsets(G)] == [9]
    await store.complete_txn_offsets(P[H], PID, commit=False)
    assert await store.pending_offsets(H) == [] and await store.fetch_offsets(H) == []


async def test_the_last_txn_commit_of_a_partition_in_the_transaction_counts(
    store: MetaStore,
) -> None:
    await _txn(store, PID, G, 0, 9)
    await _txn(store, PID, G, 0, 11)
    await store.complete_txn_offsets(P[G], PID, commit=True)
    assert [o.offset for o in await store.fetch_offsets(G)] == [11]


async def test_delete_drops_pending_too(store: MetaStore) -> None:
    await _txn(store, PID, G, 0, 9)
    await _txn(store, PID, G, 1, 9)
    await store.delete_offsets(G, [(T, 0)])
    assert await store.pending_offsets(G) == [(T, 1)]
    await store.delete_group(G)
    assert await store.pending_offsets(G) == []
    await store.complete_txn_offsets(P[G], PID, commit=True)
    assert await store.fetch_offsets(G) == []


async def test_a_deleted_topic_takes_its_pending_offsets(store: MetaStore) -> None:
    await store.create_topic(T, {}, [1])
    await _txn(store, PID, G, 0, 9)
    await store.delete_topic(T)
    assert await store.pending_offsets(G) == []
    await store.complete_txn_offsets(P[G], PID, commit=True)
    assert await store.fetch_offsets(G) == []
