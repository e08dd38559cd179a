"""What a partition's leader gives the transaction admin tools and the settings it
honours (docs/transactions.md, "Admin and metrics", "Settings"):

- DescribeProducers' rows: producer id, epoch, last sequence, last timestamp (the last
  batch's max timestamp), the coordinator epoch of its last marker, and the first offset
  of its open transaction;
- `producer.id.expiration.ms`: idle producers with no transaction open forgotten on the
  leader's clock, an open one kept, one loaded by a new leader counted from then;
- `transaction.partition.verification.enable=false`: a Produce v11 batch opens its
  transaction unverified (the coordinator never asked), v12 still adds the partition;
- the admin's abort (`kafka-transactions abort`) of such a hanging transaction: an abort
  marker through the coordinator's marker path (the WAL, then the leader), after which
  the last stable offset moves on and the aborted index names the range; fenced by the
  producer epoch and the coordinator epoch as the coordinator's markers are.

Real leader, WAL writer over an in-memory object store and a SQLite file as the metadata
store (whose worker thread answers: `integration`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.leader_forwarder.test_txn_verify import Catalog, _plain, _txn
from tests.storage.fakes import MemoryStore
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ActiveProducer
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock
from zonegate.services.txn_admin import TxnAdminService
from zonegate.services.txn_markers import WalMarkerWriter
from zonegate.transactions.decisions import Answer
from zonegate.transactions.partition_txns import AbortedTxn
from zonegate.wal_s3.wal_writer import WalWriter

pytestmark = pytest.mark.integration

E = ErrorCode


class Coordinators:
    """A coordinator that records what it is asked and says yes."""

    def __init__(self) -> None:
        self.asked: list[tuple[Any, ...]] = []

    async def verify_partitions(self, *args: Any) -> dict[tuple[str, int], ErrorCode]:
        self.asked.append(("verify", *args))
        return dict.fromkeys(args[3], E.none)

    async def add_partitions(self, *args: Any) -> Answer:
        self.asked.append(("add", *args[:3], list(args[3])))
        return Answer(E.none)


class Unused:
    """The admin service's coordinator side, which an abort never asks."""

    node_id = 1

    def txn_coordinator_for(self, shard: int, zone: str, listener: str | None = None) -> None:
        raise AssertionError("not asked")

    async def describe(self, transactional_id: str) -> Any:
        raise AssertionError("not asked")

    async def list_transactions(self, *args: Any) -> Any:
        raise AssertionError("not asked")


def test_producer_rows_expiry_and_verification_off(tmp_path: Path) -> None:
    async def body() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        topic = await meta.create_topic("t", {}, [1])
        sid = topic.partitions[0].stream_id
        catalog = Catalog(topic)
        clock = ManualClock()
        leader = LeaderService(meta, clock)
        try:
            # Verification on (the default) with no coordinator to ask: refused.
            assert (await leader.append([_txn(sid, 9, 0, 0, 11)]))[0].error == E.invalid_txn_state
            coordinators = Coordinators()
            leader.use_transactions(coordinators, catalog.of, verification=False)
            idem = _plain(sid, 5, 0, 0)
            assert (await leader.append([idem]))[0].base_offset == 0
            # Off: v11 opens its transaction at once, never asking the coordinator...
            opened = await leader.append([_txn(sid, 9, 0, 0, 11, 3)])
            assert opened[0] == opened[0].__class__(E.none, 1, 0)
            assert coordinators.asked == []
            # ...but v12's implicit add (transaction version 2) is still made.
            assert (await leader.append([_txn(sid, 10, 0, 0, 12)]))[0].error == E.none
            assert coordinators.asked == [("add", "app", 10, 0, [("t", 0)])]
            assert await leader.producers(sid) == [
                ActiveProducer(5, 0, 0, 1000, -1, -1),
                ActiveProducer(9, 0, 2, 1000, -1, 1),
                ActiveProducer(10, 0, 0, 1000, -1, 4),
            ]
            assert await leader.stable_offset(sid) == 1
            # producer.id.expiration.ms: the idle idempotent producer goes; the two with a
            # transaction open stay.
            await clock.advance(1.0)
            await leader.expire_producers(2000)
            assert [p.producer_id for p in await leader.producers(sid)] == [5, 9, 10]
            await clock.advance(1.5)
            await leader.expire_producers(2000)
            assert [p.producer_id for p in await leader.producers(sid)] == [9, 10]
            # Forgotten: its next batch at any sequence is a new producer's.
            assert (await leader.append([_plain(sid, 5, 0, 7)]))[0].error == E.none
        finally:
            await meta.close()

        # A new leader loads the rows with no times: shown as -1, counted from its first
        # sweep rather than expired at once.
        meta2 = SqliteMetaStore(str(tmp_path / "m.db"))
        try:
            clock2 = ManualClock(wall_ms=1_800_000_000_000)
            leader2 = LeaderService(meta2, clock2)
            loaded = await leader2.producers(sid)
            assert [(p.producer_id, p.last_timestamp, p.txn_start_offset) for p in loaded] == [
                (5, -1, -1),
                (9, -1, 1),
                (10, -1, 4),
            ]
            await leader2.expire_producers(2000)
            assert [p.producer_id for p in await leader2.producers(sid)] == [5, 9, 10]
            await clock2.advance(3.0)
            await leader2.expire_producers(2000)
            assert [p.producer_id for p in await leader2.producers(sid)] == [9, 10]
        finally:
            await meta2.close()

    asyncio.run(asyncio.wait_for(body(), 60))


def test_the_admins_abort_of_a_hanging_transaction(tmp_path: Path) -> None:
    async def body() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        topic = await meta.create_topic("t", {}, [1, 1])
        s0, s1 = (p.stream_id for p in topic.partitions)
        catalog = Catalog(topic)
        clock = ManualClock()
        leader = LeaderService(meta, clock)
        wal = WalWriter(MemoryStore(), node_id=1, seal_bytes=1, seal_age_s=3600)
        markers = WalMarkerWriter(catalog, wal, leader, clock)
        admin = TxnAdminService(Unused(), Unused(), 4, catalog, leader, markers)
        # Verification off: a transaction the coordinator never heard of, left hanging.
        leader.use_transactions(Coordinators(), catalog.of, verification=False)
        try:
            assert (await leader.append([_txn(s0, 9, 2, 0, 11, 2)]))[0].base_offset == 0
            assert (await leader.append([_plain(s0, 5, 0, 0)]))[0].base_offset == 2
            assert (await leader.stable_offset(s0), (await leader.offsets(s0))[1]) == (0, 3)
            error, producers = await admin.producers("t", 0)
            (hanging,) = [p for p in producers if p.txn_start_offset >= 0]
            assert error == E.none
            assert (hanging.producer_id, hanging.epoch, hanging.coordinator_epoch) == (9, 2, -1)
            # An older producer epoch is refused by the leader, as a zombie's marker.
            assert await admin.abort(9, 1, 0, [("t", 0)]) == {("t", 0): E.invalid_producer_epoch}
            # kafka-transactions abort: the epoch DescribeProducers showed, coordinator
            # epoch 0 for the -1 it showed. Partition 1 has nothing open: nothing written.
            assert await admin.abort(9, 2, 0, [("t", 0), ("t", 1), ("u", 0)]) == {
                ("t", 0): E.none,
                ("t", 1): E.none,
                ("u", 0): E.unknown_topic_or_partition,
            }
            assert (await leader.offsets(s1))[1] == 0, "no marker where nothing was open"
            # The marker took offset 3; the LSO moved on past it.
            assert (await leader.offsets(s0))[1] == 4
            assert await leader.stable_offset(s0) == 4
            state = await leader.transactions(s0)
            assert state.open_transactions() == []
            assert state.aborted == [AbortedTxn(9, 0, 3, 4)]
            # Again: nothing open any more, nothing written.
            assert await admin.abort(9, 2, 0, [("t", 0)]) == {("t", 0): E.none}
            assert (await leader.offsets(s0))[1] == 4
            # A coordinator epoch older than the producer's last marker's is fenced.
            await markers.write(7, 0, 5, True, frozenset({("t", 1)}), "a coordinator's")
            assert (await leader.append([_txn(s1, 7, 0, 0, 11)]))[0].base_offset == 1
            assert await admin.abort(7, 0, 4, [("t", 1)]) == {
                ("t", 1): E.transaction_coordinator_fenced
            }
            assert await admin.abort(7, 0, 5, [("t", 1)]) == {("t", 1): E.none}
            assert await leader.stable_offset(s1) == 3
        finally:
            await wal.close()
            await meta.close()

    asyncio.run(asyncio.wait_for(body(), 60))
