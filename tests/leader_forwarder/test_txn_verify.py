"""KIP-890 at the partition leader (leader_forwarder/txn_verify.py, sequencer.py): a
transaction's first batch at a partition is taken only once its coordinator says the
partition is in the transaction (verify-only up to Produce v11, the implicit add from
v12), refused as Kafka answers otherwise; the open transaction holds the last stable
offset back until its marker lands; an abort adds an aborted-index entry that a new
leader loads; TV2's bumped epoch fences a late batch of the ended transaction.

All real: the coordinator role and its routing (one node owning every shard), markers
through a WAL writer over an in-memory object store to the same leader, a SQLite file
as the metadata store. The role's writes are answered from the store's worker thread,
so the test waits in real time for the markers (hence `integration`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.storage.fakes import MemoryStore
from tests.txn_coordinator.test_role import CONFIG, until
from zonegate.broker.txn_metrics import txn_metrics
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.metastore.models import TopicInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock
from zonegate.services.txn_markers import WalMarkerWriter
from zonegate.services.txn_routing import RoutedTxns
from zonegate.transactions.decisions import Answer
from zonegate.transactions.partition_txns import AbortedTxn
from zonegate.transactions.states import TransactionVersion
from zonegate.txn_coordinator.role import TxnCoordinator
from zonegate.wal_s3.wal_writer import WalWriter

pytestmark = pytest.mark.integration

E = ErrorCode
TV0, TV2 = TransactionVersion.TV_0, TransactionVersion.TV_2
TID = "app"


class Catalog:
    def __init__(self, topic: TopicInfo) -> None:
        self.topic = topic

    def get(self, name: str) -> TopicInfo | None:
        return self.topic if name == self.topic.name else None

    async def lookup(self, name: str) -> TopicInfo | None:
        return self.get(name)

    def of(self, stream_id: int) -> tuple[str, int] | None:
        for p in self.topic.partitions:
            if p.stream_id == stream_id:
                return p.topic, p.partition
        return None


class Owners:
    def txn_shard_owner(self, shard: int) -> int:
        return 1


def _txn(sid: int, pid: int, epoch: int, seq: int, version: int, count: int = 1) -> AppendBatch:
    return AppendBatch(
        sid, ANY_EPOCH, "obj", 0, 100, count, 1000, pid, epoch, seq,
        transactional=True, transactional_id=TID, produce_version=version,
    )  # fmt: skip


def _plain(sid: int, pid: int, epoch: int, seq: int) -> AppendBatch:
    return AppendBatch(sid, ANY_EPOCH, "obj", 0, 100, 1, 1000, pid, epoch, seq)


def test_a_transactions_first_batch_needs_its_coordinators_yes(tmp_path: Path) -> None:
    async def body() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        topic = await meta.create_topic("t", {}, [1, 1, 1])
        s0, s1, s2 = (p.stream_id for p in topic.partitions)
        catalog = Catalog(topic)
        clock = ManualClock()
        leader = LeaderService(meta, clock)
        wal = WalWriter(MemoryStore(), node_id=1, seal_bytes=1, seal_age_s=3600)
        role = TxnCoordinator(
            1, 10, meta, WalMarkerWriter(catalog, wal, leader, clock), lambda s: 1, clock, CONFIG
        )
        txns = RoutedTxns(role, 1, Owners(), lambda n: None, clock, owner_wait_s=0)
        leader.use_transactions(txns, catalog.of)
        await role.start()
        try:
            init = await txns.init_producer_id(TID, 60000, None)
            pid, epoch = init.producer_id, init.producer_epoch
            # Under transaction version 1 (Produce v11): verify-only.
            assert (await txns.add_partitions(TID, pid, epoch, [("t", 0)], TV0)).error == E.none
            await leader.append([_plain(s0, 99, 0, 0)])  # offset 0, another producer's
            first = await leader.append(
                [_txn(s0, pid, epoch, 0, 11, 2), _txn(s1, pid, epoch, 0, 11)]
            )
            assert first[0].error == E.none and first[0].base_offset == 1
            # Not added to the transaction: v11 hears TRANSACTION_ABORTABLE, v10 and
            # older INVALID_TXN_STATE (Kafka's translation).
            assert first[1].error == E.transaction_abortable
            older = await leader.append([_txn(s1, pid, epoch, 0, 10)])
            assert older[0].error == E.invalid_txn_state
            # The open transaction's later batches need no question; a plain batch of
            # the producer in the middle of it is refused.
            assert (await leader.append([_txn(s0, pid, epoch, 2, 11)]))[0].base_offset == 3
            assert (await leader.append([_plain(s0, pid, epoch, 3)]))[
                0
            ].error == E.invalid_txn_state
            state = await leader.transactions(s0)
            assert state.last_stable_offset(4) == 1, "held at the transaction's first offset"
            # What the node's metrics show of it: one open transaction, its age, the lag.
            assert leader.lso_lags() == {s0: 3}
            await clock.advance(5.0)
            metrics = {
                f.name: [(s.labels, s.value) for s in f.samples]
                for f in txn_metrics(role, leader.lso_lags(), catalog.of, "1", clock.wall_ms())
            }
            assert metrics["zonegate_txn_open_transactions"] == [({"node": "1"}, 1)]
            assert metrics["zonegate_txn_oldest_open_seconds"] == [({"node": "1"}, 5.0)]
            assert metrics["zonegate_lso_lag_offsets"] == [
                ({"node": "1", "topic": "t", "partition": "0"}, 3)
            ]
            # Aborted: the marker lands through the WAL, the LSO moves past it, and the
            # aborted index names the transaction's range.
            assert (await txns.end_txn(TID, pid, epoch, False, TV0)).error == E.none
            await until(lambda: role.describe(TID).state == "CompleteAbort")
            state = await leader.transactions(s0)
            assert state.open_transactions() == []
            assert state.aborted == [AbortedTxn(pid, 1, 4, 5)]
            assert (await leader.offsets(s0))[1] == 5
            assert leader.lso_lags() == {} and role.open_transactions() == (0, None)
            # A stale verification cannot open a transaction the coordinator ended: the
            # partition is no longer in it.
            late = await leader.append([_txn(s0, pid, epoch, 4, 11)])
            assert late[0].error == E.transaction_abortable

            # Transaction version 2 (Produce v12): the leader adds the partition itself.
            init = await txns.init_producer_id(TID, 60000, (pid, epoch))
            pid, epoch = init.producer_id, init.producer_epoch
            taken = await leader.append([_txn(s2, pid, epoch, 0, 12)])
            assert taken[0].error == E.none and taken[0].base_offset == 0
            assert role.describe(TID).partitions == frozenset({("t", 2)})
            ended = await txns.end_txn(TID, pid, epoch, True, TV2)
            assert ended.error == E.none and ended.producer_epoch == epoch + 1
            await until(lambda: role.describe(TID).state == "CompleteCommit")
            # A late write of the ended transaction, at its old epoch, is fenced.
            stale = await leader.append([_txn(s2, pid, epoch, 1, 12)])
            assert stale[0].error == E.invalid_producer_epoch
            assert (await leader.transactions(s2)).last_stable_offset(2) == 2
        finally:
            await role.stop()
            await wal.close()
            await meta.close()

        # A new leader loads the aborted index and the producers' transaction state.
        meta2 = SqliteMetaStore(str(tmp_path / "m.db"))
        try:
            leader2 = LeaderService(meta2)
            state = await leader2.transactions(s0)
            assert state.aborted == [AbortedTxn(pid, 1, 4, 5)]
            assert state.last_stable_offset(5) == 5
            # The log start moved past the aborted transaction: its entry goes with it.
            assert await leader2.delete_records(s0, 5) == (E.none, 5)
            assert (await leader2.transactions(s0)).aborted == []
        finally:
            await meta2.close()

    asyncio.run(asyncio.wait_for(body(), 60))


class ReloadedWhileAsked:
    """The coordinators, with the partition dropped and loaded again while the question
    is out (its leader epoch moved and came back, say): the guard went with the old
    state."""

    def __init__(self, txns: RoutedTxns, leader: LeaderService, stream_id: int) -> None:
        self.txns, self.leader, self.stream_id = txns, leader, stream_id

    async def verify_partitions(self, *args: Any) -> dict[tuple[str, int], ErrorCode]:
        self.leader.forget([self.stream_id])
        await self.leader.offsets(self.stream_id)
        return await self.txns.verify_partitions(*args)

    async def add_partitions(self, *args: Any) -> Answer:
        return await self.txns.add_partitions(*args)


def test_a_partition_reloaded_during_its_verification_answers_retriably(tmp_path: Path) -> None:
    async def body() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        topic = await meta.create_topic("t", {}, [1])
        sid = topic.partitions[0].stream_id
        catalog = Catalog(topic)
        clock = ManualClock()
        leader = LeaderService(meta, clock)
        wal = WalWriter(MemoryStore(), node_id=1, seal_bytes=1, seal_age_s=3600)
        role = TxnCoordinator(
            1, 10, meta, WalMarkerWriter(catalog, wal, leader, clock), lambda s: 1, clock, CONFIG
        )
        txns = RoutedTxns(role, 1, Owners(), lambda n: None, clock, owner_wait_s=0)
        await role.start()
        try:
            init = await txns.init_producer_id(TID, 60000, None)
            pid, epoch = init.producer_id, init.producer_epoch
            assert (await txns.add_partitions(TID, pid, epoch, [("t", 0)], TV0)).error == E.none
            leader.use_transactions(ReloadedWhileAsked(txns, leader, sid), catalog.of)
            moved = await leader.append([_txn(sid, pid, epoch, 0, 11)])
            assert moved[0].error == E.not_leader_or_follower  # not INVALID_TXN_STATE
            leader.use_transactions(txns, catalog.of)
            again = await leader.append([_txn(sid, pid, epoch, 0, 11)])
            assert again[0].error == E.none and again[0].base_offset == 0
        finally:
            await role.stop()
            await wal.close()
            await meta.close()

    asyncio.run(asyncio.wait_for(body(), 60))
