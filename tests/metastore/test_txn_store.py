"""TransactionStore's contract: coordinator shards taken over by epoch compare-and-set, each
transactional id's state written fenced by its shard's epoch; every backend runs it."""

from __future__ import annotations

import asyncio

import pytest

from tests.metastore.backends import Stores
from zonegate.metastore.models import ShardFenced, ShardOwner
from zonegate.transactions.metadata import TransactionMetadata, TxnTransit
from zonegate.transactions.states import TransactionVersion, TxnState


def _ongoing(txn_id: str, pid: int = 4000) -> tuple[TransactionMetadata, TxnTransit]:
    """An id moved to Ongoing with two partitions (a topic name that needs quoting in JSON
    among them), the move written but not yet completed."""
    meta = TransactionMetadata(txn_id, pid, producer_epoch=3, last_producer_epoch=2)
    meta.prev_producer_id, meta.next_producer_id = pid - 1, -1
    transit = meta.prepare_add_partitions(
        frozenset({("t", 1), ('odd "topic" é', 0)}), 1_700_000_000_123, TransactionVersion.TV_2
    )
    return meta, transit


def _fields(m: TransactionMetadata) -> tuple[object, ...]:
    return (
        m.transactional_id, m.producer_id, m.prev_producer_id, m.next_producer_id,
        m.producer_epoch, m.last_producer_epoch, m.txn_timeout_ms, m.state, m.partitions,
        m.txn_start_ms, m.txn_last_update_ms, m.client_version, m.pending_state,
    )  # fmt: skip


async def test_a_shard_is_taken_by_compare_and_set_on_its_epoch(stores: Stores) -> None:
    a, b = stores.open(), stores.open()
    assert await a.txn_shards() == [] and await a.shard_epoch(7) == 0
    assert await a.take_shard(7, node_id=1, incarnation=11, seen_epoch=0) == 1
    assert await b.shard_epoch(7) == 1
    assert await b.txn_shards() == [ShardOwner(7, 1, 1, 11)]
    # A node that read the shard before that takeover is refused, and nothing changes.
    with pytest.raises(ShardFenced) as fenced:
        await b.take_shard(7, node_id=2, incarnation=22, seen_epoch=0)
    assert fenced.value.current == 1
    assert await a.txn_shards() == [ShardOwner(7, 1, 1, 11)]
    assert await b.take_shard(7, node_id=2, incarnation=22, seen_epoch=1) == 2
    assert await b.take_shard(3, node_id=2, incarnation=22, seen_epoch=0) == 1
    assert await a.txn_shards() == [ShardOwner(3, 1, 2, 22), ShardOwner(7, 2, 2, 22)]


async def test_two_nodes_taking_a_shard_at_once_one_wins(stores: Stores) -> None:
    a, b = stores.open(), stores.open()
    for shard in range(5):
        seen = 0 if shard % 2 else await a.take_shard(shard, 9, 9, 0)
        outcomes = await asyncio.gather(
            a.take_shard(shard, 1, 1, seen), b.take_shard(shard, 2, 2, seen), return_exceptions=True
        )
        won = [o for o in outcomes if isinstance(o, int)]
        assert won == [seen + 1], outcomes
        assert sum(isinstance(o, ShardFenced) for o in outcomes) == 1, outcomes


async def test_an_id_is_written_and_loaded_back_as_it_was(stores: Stores) -> None:
    a = stores.open()
    epoch = await a.take_shard(4, 1, 1, 0)
    meta, transit = _ongoing("app-1")
    await a.write_txn(4, epoch, "app-1", transit)
    meta.complete_transition(transit)
    other, other_transit = _ongoing("app-2", pid=5000)
    await a.write_txn(4, epoch, "app-2", other_transit)
    await a.write_txn(9, await a.take_shard(9, 1, 1, 0), "elsewhere", _ongoing("x")[1])

    # Another node (after a takeover, or after a restart) loads exactly that.
    await stores.close_all()
    b = stores.open()
    loaded = await b.load_shard(4)
    assert [m.transactional_id for m in loaded] == ["app-1", "app-2"], "by id, this shard's"
    assert _fields(loaded[0]) == _fields(meta)
    assert loaded[0].state == TxnState.ONGOING and loaded[0].partitions == {
        ("t", 1),
        ('odd "topic" é', 0),
    }

    # A later move replaces the row: the id ends its transaction.
    epoch = await b.take_shard(4, 2, 2, epoch)
    end = loaded[0].prepare_abort_or_commit(
        TxnState.PREPARE_COMMIT, TransactionVersion.TV_2, -1, 1_700_000_001_000
    )
    await b.write_txn(4, epoch, "app-1", end)
    loaded[0].complete_transition(end)
    again = await b.load_shard(4)
    assert _fields(again[0]) == _fields(loaded[0])
    assert (again[0].state, again[0].producer_epoch, again[0].last_producer_epoch) == (
        TxnState.PREPARE_COMMIT,
        4,
        3,
    )
    assert await b.load_shard(5) == []


async def test_a_deposed_owner_writes_nothing(stores: Stores) -> None:
    old, new = stores.open(), stores.open()
    first = await old.take_shard(2, 1, 1, 0)
    _, transit = _ongoing("app")
    await old.write_txn(2, first, "app", transit)
    second = await new.take_shard(2, 2, 2, first)
    meta = (await new.load_shard(2))[0]
    end = meta.prepare_abort_or_commit(TxnState.PREPARE_ABORT, TransactionVersion.TV_0, -1, 5)
    with pytest.raises(ShardFenced):
        await old.write_txn(2, first, "app", end)
    with pytest.raises(ShardFenced):
        await old.delete_txn(2, first, "app")
    with pytest.raises(ShardFenced):
        await old.write_txn(8, 1, "never-taken", transit)
    assert [m.state for m in await new.load_shard(2)] == [TxnState.ONGOING], "unchanged"
    assert await new.load_shard(8) == []

    await new.delete_txn(2, second, "app")
    await new.delete_txn(2, second, "unknown")  # nothing to forget
    assert await new.load_shard(2) == []
