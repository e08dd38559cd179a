"""read_committed reads (services/read_path.py over the leader's transaction state): Fetch
answers nothing at or past the last stable offset and names the aborted transactions of
the range; read_uncommitted sees everything with the LSO answered; ListOffsets latest is
the LSO under read_committed, as Kafka's lastFetchableOffset.

All real: the coordinator role and its routing (one node owning every shard), record
batches and markers staged in a WAL writer over an in-memory object store, the leader
over a SQLite file, the read path reading the bytes back. The role's writes are
answered from the store's worker thread, so the test waits in real time for the
markers (hence `integration`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.storage.fakes import MemoryStore
from tests.txn_coordinator.test_role import CONFIG, until
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.metastore.models import TopicInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.records.batch import iter_batches
from zonegate.records.build import build_batch
from zonegate.runtime.clock import ManualClock
from zonegate.services.api import FetchPartition
from zonegate.services.read_path import LATEST, ReadService
from zonegate.services.topic_configs import topic_rules
from zonegate.services.txn_markers import WalMarkerWriter
from zonegate.services.txn_routing import RoutedTxns
from zonegate.storage.log_cache import LogCache
from zonegate.storage.reader import StreamReader
from zonegate.storage.topic_rules import TopicRules
from zonegate.transactions.states import TransactionVersion
from zonegate.txn_coordinator.role import TxnCoordinator
from zonegate.wal_s3.wal_writer import WalWriter

pytestmark = pytest.mark.integration

E = ErrorCode
TID = "app"
NOW = 1_700_000_000_000


class Catalog:
    def __init__(self, topic: TopicInfo) -> None:
        self.topic = topic

    def get(self, name: str) -> TopicInfo | None:
        return self.topic if name == self.topic.name else None

    async def lookup(self, name: str) -> TopicInfo | None:
        return self.get(name)

    def rules(self, topic: TopicInfo) -> TopicRules:
        return topic_rules(topic.configs)

    def of(self, stream_id: int) -> tuple[str, int] | None:
        p = self.topic.partitions[0]
        return (p.topic, p.partition) if p.stream_id == stream_id else None


class Owners:
    def txn_shard_owner(self, shard: int) -> int:
        return 1


async def _append(
    wal: WalWriter, leader: LeaderService, sid: int, count: int, pid: int, epoch: int,
    seq: int, transactional: bool,
) -> int:  # fmt: skip
    """One real batch staged in the WAL and appended: its base offset."""
    data = build_batch(
        [(b"k", b"v%d" % i, [], NOW) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )
    loc = await wal.append(sid, data)
    batch = AppendBatch(
        sid, ANY_EPOCH, loc.object_key, loc.position, loc.length, count, NOW, pid, epoch, seq,
        transactional=transactional, transactional_id=TID if transactional else "",
        produce_version=11,
    )  # fmt: skip
    (result,) = await leader.append([batch])
    assert result.error == E.none, result
    return result.base_offset


def test_read_committed_stops_at_the_lso_and_names_aborted_transactions(tmp_path: Path) -> None:
    async def body() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        topic = await meta.create_topic("t", {}, [1])
        sid = topic.partitions[0].stream_id
        catalog = Catalog(topic)
        clock = ManualClock()
        store = MemoryStore()
        leader = LeaderService(meta, clock)
        wal = WalWriter(store, node_id=1, seal_bytes=1, seal_age_s=3600)
        role = TxnCoordinator(
            1, 10, meta, WalMarkerWriter(catalog, wal, leader, clock), lambda s: 1, clock, CONFIG
        )
        txns = RoutedTxns(role, 1, Owners(), lambda n: None, clock, owner_wait_s=0)
        leader.use_transactions(txns, catalog.of)
        reads = ReadService(catalog, leader, StreamReader(store, LogCache(0)), meta, clock)

        async def fetch(committed: bool) -> tuple[int, list[int], tuple[tuple[int, int], ...]]:
            (a,) = await reads.fetch(
                [FetchPartition("t", 0, 0, 1 << 20)],
                max_bytes=1 << 20,
                min_bytes=1,
                max_wait_s=0,
                read_committed=committed,
            )
            assert a.error == E.none
            bases = [h.base_offset for _, h in iter_batches(a.records)]
            return a.last_stable_offset, bases, a.aborted_transactions

        async def latest(committed: bool) -> int:
            answer = await reads.list_offset(
                "t", 0, LATEST, max_timestamp_allowed=True, read_committed=committed
            )
            return answer.offset

        await role.start()
        try:
            init = await txns.init_producer_id(TID, 60000, None)
            pid, epoch = init.producer_id, init.producer_epoch
            added = await txns.add_partitions(TID, pid, epoch, [("t", 0)], TransactionVersion.TV_0)
            assert added.error == E.none
            assert await _append(wal, leader, sid, 2, pid, epoch, 0, True) == 0
            assert await _append(wal, leader, sid, 1, 99, 0, 0, False) == 2
            # Open: read_committed sees nothing past the transaction's first offset.
            assert await fetch(True) == (0, [], ())
            assert await fetch(False) == (0, [0, 2], ())
            assert (await latest(True), await latest(False)) == (0, 3)
            # Aborted: everything is stable; the aborted range is named for the client
            # to skip, and the marker takes offset 3.
            assert (await txns.end_txn(TID, pid, epoch, False, TransactionVersion.TV_0)).error == (
                E.none
            )
            await until(lambda: role.describe(TID).state == "CompleteAbort")
            assert await fetch(True) == (4, [0, 2, 3], ((pid, 0),))
            assert await fetch(False) == (4, [0, 2, 3], ())
            assert (await latest(True), await latest(False)) == (4, 4)
        finally:
            await role.stop()
            await wal.close()
            await meta.close()

    asyncio.run(asyncio.wait_for(body(), 60))
