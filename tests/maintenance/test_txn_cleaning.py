"""Transactional data through the compactor's real cleaning path (maintenance/compaction.py
then maintenance/cleaning.py) of a compacted partition: an aborted transaction's record
goes at the first round, its index entry once none of its batches is left, its marker
at the delete horizon; the committed transaction's record and marker stay; an open
transaction (at or above the LSO) is left untouched until it commits; a
read_committed Fetch answers the same records throughout, and a new leader loads the
index the cleaning left.

All real: the coordinator role and its routing (one node owning every shard), record
batches and markers staged in a WAL writer over an in-memory object store, the leader
over a SQLite file, compaction into stream objects, the read path. The role's writes
are answered from the store's worker thread, so the test waits in real time for the
markers (hence `integration`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.services.test_read_committed import Catalog, Owners
from tests.storage.fakes import MemoryStore
from tests.txn_coordinator.test_role import CONFIG, until
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.maintenance.compaction import CompactionSettings, Compactor
from zonegate.maintenance.targets import Target
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.records.batch import iter_batches
from zonegate.records.build import build_batch
from zonegate.records.decode import decode_records
from zonegate.runtime.clock import ManualClock
from zonegate.services.api import FetchPartition
from zonegate.services.read_path import ReadService
from zonegate.services.txn_markers import WalMarkerWriter
from zonegate.services.txn_routing import RoutedTxns
from zonegate.storage.cleaner import CleanerConfig, clean_mark
from zonegate.storage.log_cache import LogCache
from zonegate.storage.reader import StreamReader
from zonegate.storage.stream_objects import is_stream_key
from zonegate.transactions.markers import decode_marker
from zonegate.transactions.partition_txns import AbortedTxn
from zonegate.transactions.states import TransactionVersion
from zonegate.txn_coordinator.role import TxnCoordinator
from zonegate.wal_s3.wal_writer import WalWriter

pytestmark = pytest.mark.integration

E = ErrorCode
TID = "app"
HOUR = 3_600_000
TV0 = TransactionVersion.TV_0


def test_the_compactor_cleans_transactional_data_by_kafkas_rules(tmp_path: Path) -> None:
    async def body() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        topic = await meta.create_topic("t", {"cleanup.policy": "compact"}, [1])
        sid = topic.partitions[0].stream_id
        catalog = Catalog(topic)
        clock = ManualClock()
        store = MemoryStore()
        leader = LeaderService(meta, clock, lambda _sid: (HOUR, 1 << 30))
        wal = WalWriter(store, node_id=1, seal_bytes=1, seal_age_s=3600)
        role = TxnCoordinator(
            1, 10, meta, WalMarkerWriter(catalog, wal, leader, clock), lambda s: 1, clock, CONFIG
        )
        txns = RoutedTxns(role, 1, Owners(), lambda n: None, clock, owner_wait_s=0)
        leader.use_transactions(txns, catalog.of)
        reader = StreamReader(store, LogCache(0))
        reads = ReadService(catalog, leader, reader, meta, clock)
        config = CleanerConfig(
            min_cleanable_dirty_ratio=0.0, delete_retention_ms=HOUR, segment_ms=HOUR
        )
        compactor = Compactor(
            leader.changes,
            store,
            reader.read,
            lambda: [Target(sid, HOUR, 1 << 30, config)],
            clock,
            CompactionSettings(stream_object_bytes=64 * 1024, max_delay_ms=60_000),
        )

        async def append(key: bytes, pid: int = -1, epoch: int = -1, seq: int = -1) -> int:
            transactional = pid >= 0
            now = clock.wall_ms()
            data = build_batch(
                [(key, b"%s@%d" % (key, now), [], now)],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                is_transactional=transactional,
            )
            loc = await wal.append(sid, data)
            batch = AppendBatch(
                sid, ANY_EPOCH, loc.object_key, loc.position, loc.length, 1, now, pid, epoch,
                seq, transactional=transactional, transactional_id=TID if transactional else "",
                produce_version=11,
            )  # fmt: skip
            (result,) = await leader.append([batch])
            assert result.error == E.none, result
            return result.base_offset

        Read = tuple[list[tuple[int, bytes]], list[int], tuple[tuple[int, int], ...]]

        async def fetch(committed: bool) -> Read:
            (a,) = await reads.fetch(
                [FetchPartition("t", 0, 0, 1 << 20)],
                max_bytes=1 << 20,
                min_bytes=1,
                max_wait_s=0,
                read_committed=committed,
            )
            assert a.error == E.none
            # As Kafka's consumer reads it: a producer named by an aborted transaction
            # is skipped from its first offset until its ABORT marker.
            records: list[tuple[int, bytes]] = []
            markers: list[int] = []
            skipping: set[int] = set()
            pending = sorted(a.aborted_transactions, key=lambda t: t[1])
            data = bytes(a.records)
            for pos, h in iter_batches(data):
                batch = data[pos : pos + h.size]
                while pending and pending[0][1] <= h.base_offset + h.last_offset_delta:
                    skipping.add(pending.pop(0)[0])
                if h.is_control:
                    markers.append(h.base_offset)
                    if not decode_marker(batch).commit:
                        skipping.discard(h.producer_id)
                elif not (h.is_transactional and h.producer_id in skipping):
                    records += [(r.offset, r.key or b"") for r in decode_records(batch)]
            return records, markers, a.aborted_transactions

        async def transaction(key: bytes, pid: int, epoch: int, seq: int, commit: bool) -> int:
            added = await txns.add_partitions(TID, pid, epoch, [("t", 0)], TV0)
            assert added.error == E.none
            offset = await append(key, pid, epoch, seq)
            assert (await txns.end_txn(TID, pid, epoch, commit, TV0)).error == E.none
            done = "CompleteCommit" if commit else "CompleteAbort"
            await until(lambda: role.describe(TID).state == done)
            return offset

        async def clean_after(hours: float) -> None:
            await clock.advance(hours * HOUR / 1000)
            await compactor.run_once()

        await role.start()
        try:
            init = await txns.init_producer_id(TID, 60000, None)
            pid, epoch = init.producer_id, init.producer_epoch
            assert await append(b"k1") == 0
            assert await transaction(b"k1", pid, epoch, 0, commit=False) == 1  # marker at 2
            assert await transaction(b"k2", pid, epoch, 1, commit=True) == 3  # marker at 4
            assert await append(b"k3") == 5
            visible = [(0, b"k1"), (3, b"k2"), (5, b"k3")]
            assert await fetch(True) == (visible, [2, 4], ((pid, 1),))

            # Round 1: the WAL ranges become stream objects, markers as any batch; the
            # aborted record goes, and never hid k1's committed value.
            await clean_after(2)
            assert compactor.cleaning.cleanings == 1
            state = await leader.transactions(sid)
            assert state.aborted == [AbortedTxn(pid, 1, 2, 3)]  # its batch was met
            assert await fetch(True) == (visible, [2, 4], ((pid, 1),))
            records, markers, _ = await fetch(False)
            assert records == visible and markers == [2, 4]
            idx = await leader.read_index(sid, 0, 1 << 20)
            assert all(is_stream_key(e.object_key) for e in idx.entries)

            # Round 2: no batch of the aborted transaction is left: its entry leaves the
            # index (in the store and in the leader's memory) and its marker gets its
            # delete horizon. The committed record keeps its marker.
            assert await append(b"k4") == 6
            await clean_after(2)
            assert compactor.cleaning.cleanings == 2
            assert (await leader.transactions(sid)).aborted == []
            visible.append((6, b"k4"))
            assert await fetch(True) == (visible, [2, 4], ())

            # Not before the horizon; at it the abort marker goes.
            await clean_after(0.5)
            assert compactor.cleaning.cleanings == 2
            await clean_after(0.5)
            assert compactor.cleaning.cleanings == 3
            assert await fetch(True) == (visible, [4], ())
            assert await fetch(False) == (visible, [4], ())

            # k3 written again (dirt below), then, in a later segment, an open
            # transaction (first offset 8, the LSO) and a later plain value of its key,
            # 15 s before that segment's window closes: 20 s later the segment is closed
            # and compacted, and the transaction (60 s timeout) still open. The round
            # cleans below the LSO and leaves the transaction and all after untouched.
            assert await append(b"k3") == 7
            await clock.advance((2 * HOUR - clock.wall_ms() % HOUR - 15_000) / 1000)
            added = await txns.add_partitions(TID, pid, epoch, [("t", 0)], TV0)
            assert added.error == E.none
            assert await append(b"k1", pid, epoch, 2) == 8
            assert await append(b"k1") == 9
            await clock.advance(20)
            await compactor.run_once()
            assert role.describe(TID).state == "Ongoing"
            assert compactor.cleaning.cleanings == 4
            idx = await leader.read_index(sid, 8, 1 << 20)
            spans = [(e.base_offset, e.last_offset) for e in idx.entries]
            assert spans == [(8, 9)]  # one chunk of the compacted object, as written
            assert not clean_mark(idx.entries[0].object_key)[0]  # cleaning never wrote it
            assert is_stream_key(idx.entries[0].object_key)
            records, _, _ = await fetch(False)
            assert records[-3:] == [(7, b"k3"), (8, b"k1"), (9, b"k1")]
            below = [(0, b"k1"), (3, b"k2"), (6, b"k4"), (7, b"k3")]  # k3 at 5 went
            assert await fetch(True) == (below, [4], ())
            # Committed: the next round cleans it by the key rules (k1's plain value wins).
            assert (await txns.end_txn(TID, pid, epoch, True, TV0)).error == E.none
            await until(lambda: role.describe(TID).state == "CompleteCommit")
            await clean_after(2)
            records, markers, _ = await fetch(True)
            assert records == [(3, b"k2"), (6, b"k4"), (7, b"k3"), (9, b"k1")]
            assert markers == [4, 10]
        finally:
            await role.stop()
            await wal.close()
            await meta.close()

        # A new leader over the same store loads the index the cleaning left.
        meta2 = SqliteMetaStore(str(tmp_path / "m.db"))
        try:
            assert (await LeaderService(meta2).transactions(sid)).aborted == []
        finally:
            await meta2.close()

    asyncio.run(asyncio.wait_for(body(), 120))
