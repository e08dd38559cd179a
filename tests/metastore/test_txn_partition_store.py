"""StreamStore's transaction state (docs/transactions.md): a producer's coordinator epoch
and open transaction's first offset, and the aborted-transaction index, committed with the
index entries, fenced by the leader epoch, and kept from the log start on; every backend
runs it."""

from __future__ import annotations

import dataclasses

from tests.metastore.backends import Stores
from tests.metastore.records import append
from zonegate.metastore.api import MetaStore
from zonegate.storage.index import ProducerEntry
from zonegate.transactions.partition_txns import AbortedTxn


async def _commit(store: MetaStore, sid: int, base: int, producer: ProducerEntry,
                  aborted: tuple[AbortedTxn, ...] = (), epoch: int = 0) -> set[int]:  # fmt: skip
    c = append(sid, base, epoch=epoch)
    return await store.commit_appends(
        [dataclasses.replace(c, producers=(producer,), aborted=aborted)]
    )


async def test_transaction_columns_and_aborted_entries_round_trip(stores: Stores) -> None:
    store = stores.open()
    sid = (await store.create_topic("t", {}, [1])).partitions[0].stream_id
    pid = (1 << 62) + 5
    open_txn = ProducerEntry(pid, 3, (), coordinator_epoch=-1, txn_first_offset=0)
    assert await _commit(store, sid, 0, open_txn) == set()
    assert (await store.load_partition(sid)).producers[pid] == open_txn

    # The abort marker at offset 2: the transaction closes, an index entry is added.
    aborted = AbortedTxn(pid, 0, 2, 3)
    closed = ProducerEntry(pid, 3, (), coordinator_epoch=4, txn_first_offset=None)
    assert await _commit(store, sid, 2, closed, (aborted,)) == set()
    later = AbortedTxn(8, 4, 9, 9)
    await _commit(store, sid, 4, ProducerEntry(8, 0, (), 4, None), (later,))

    await stores.close_all()
    state = await stores.open().load_partition(sid)
    assert state.producers[pid] == closed and state.producers[8].coordinator_epoch == 4
    assert state.aborted == (aborted, later), "by marker offset"


async def test_a_fenced_commit_adds_no_aborted_entry(store: MetaStore) -> None:
    sid = (await store.create_topic("t", {}, [1])).partitions[0].stream_id
    await store.move_partitions([(sid, 2)])
    fenced = await _commit(store, sid, 0, ProducerEntry(7, 0, ()), (AbortedTxn(7, 0, 1, 2),))
    assert fenced == {sid}
    state = await store.load_partition(sid)
    assert state.aborted == () and state.producers == {}


async def test_retention_drops_aborted_entries_whose_marker_is_below_the_log_start(
    store: MetaStore,
) -> None:
    sid = (await store.create_topic("t", {}, [1])).partitions[0].stream_id
    first, second = AbortedTxn(7, 0, 3, 4), AbortedTxn(7, 4, 7, 8)
    await _commit(store, sid, 0, ProducerEntry(7, 0, ()), (first,))
    await _commit(store, sid, 2, ProducerEntry(7, 0, ()), (second,))
    assert await store.truncate_head(sid, 0, 3) == 3
    assert (await store.load_partition(sid)).aborted == (first, second), "its marker is kept"
    assert await store.truncate_head(sid, 0, 4) == 4
    assert (await store.load_partition(sid)).aborted == (second,)


async def test_a_cleaning_swap_drops_the_aborted_entries_it_names(store: MetaStore) -> None:
    """Cleaning removed an aborted transaction's records and marker: its entry goes in
    the swap's own transaction; a refused swap drops nothing."""
    sid = (await store.create_topic("t", {}, [1])).partitions[0].stream_id
    first, second = AbortedTxn(7, 0, 1, 2), AbortedTxn(8, 2, 3, 4)
    await _commit(store, sid, 0, ProducerEntry(7, 0, ()), (first,))
    await _commit(store, sid, 2, ProducerEntry(8, 0, ()), (second,))
    old = await store.read_index(sid)
    new = [dataclasses.replace(e, object_key="streams/x") for e in old]
    assert not await store.replace_entries(sid, 0, [*old[:1], new[1]], new, drop_aborted=[1])
    assert (await store.load_partition(sid)).aborted == (first, second)
    assert await store.replace_entries(sid, 0, old, new, drop_aborted=[1])
    assert (await store.load_partition(sid)).aborted == (second,)
