"""Transaction markers written as data (services/txn_markers.py): staged in the
coordinator node's WAL, appended through a real leader over gRPC, checked there against
the partition's transaction rules (leader_forwarder/sequencer.py), and kept in the
producer rows the next leader loads.

A real WAL writer over an in-memory object store, a real leader over a SQLite file, its
gRPC server on localhost; the markers are the coordinator role's `Markers`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.storage.fakes import MemoryStore
from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.grpc_server import start_leader_server
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.metastore.models import TopicInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock
from zonegate.services.txn_markers import WalMarkerWriter
from zonegate.transactions.decisions import After, Markers, Write
from zonegate.transactions.markers import decode_marker
from zonegate.transactions.metadata import TxnTransit
from zonegate.transactions.states import TxnState
from zonegate.wal_s3.wal_writer import WalWriter

pytestmark = pytest.mark.integration

E = ErrorCode
PID = 7
TOKEN = "s3cret"


class Catalog:
    def __init__(self, *topics: TopicInfo) -> None:
        self.topics = {t.name: t for t in topics}

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    async def lookup(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)


class LateCatalog(Catalog):
    """A node's cache that has not seen the topic yet; the store has it."""

    def get(self, name: str) -> TopicInfo | None:
        return None


def _markers(epoch: int, coordinator_epoch: int, commit: bool = True) -> Markers:
    state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    transit = TxnTransit(PID, -1, -1, epoch, -1, 60000, state, frozenset(), 0, 0)
    return Markers(
        "app",
        PID,
        epoch,
        commit,
        coordinator_epoch,
        frozenset(),
        Write("app", transit, After.COMPLETE),
    )


def _data(sid: int, epoch: int, seq: int, count: int = 1) -> AppendBatch:
    return AppendBatch(sid, ANY_EPOCH, "obj", 0, 100, count, 1000, PID, epoch, seq)


def test_markers_reach_the_leader_as_data_and_fence_as_kafka_does(tmp_path: Path) -> None:
    async def body() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        topic = await meta.create_topic("t", {}, [1, 1])
        s0, s1 = (p.stream_id for p in topic.partitions)
        leader = LeaderService(meta)
        server, port = await start_leader_server(leader, "127.0.0.1", 0, token=TOKEN)
        remote = RemoteLeader(f"127.0.0.1:{port}", from_node=2, token=TOKEN)
        store = MemoryStore()
        wal = WalWriter(store, node_id=2, seal_bytes=1, seal_age_s=3600)
        writer = WalMarkerWriter(Catalog(topic), wal, remote, ManualClock())
        try:
            # An idempotent producer's data, then its transaction's commit under TV2's
            # bumped epoch, written to both partitions by the coordinator at epoch 3.
            first = await leader.append([_data(s0, 0, 0, 2), _data(s0, 0, 2)])
            assert [r.base_offset for r in first] == [0, 2]
            both = frozenset({("t", 0), ("t", 1)})
            assert await writer.write_markers(_markers(1, 3), both) == dict.fromkeys(both, E.none)
            for sid, at in ((s0, 3), (s1, 0)):
                idx = await leader.read_index(sid, at, 1 << 20)
                assert [(e.base_offset, e.last_offset) for e in idx.entries] == [(at, at)]
                e = idx.entries[0]
                batch = store.objects[e.object_key][e.position : e.position + e.length]
                m = decode_marker(batch)
                assert (m.commit, m.coordinator_epoch, m.producer_id, m.producer_epoch) == (
                    True, 3, PID, 1,
                )  # fmt: skip
            # The marker's epoch fences the old one; the producer's sequences start over.
            late = await leader.append([_data(s0, 0, 3)])
            assert late[0].error == E.invalid_producer_epoch
            assert (await leader.append([_data(s0, 1, 0)]))[0].base_offset == 4
            # A deposed coordinator's marker, and a zombie producer's, are refused.
            stale = await writer.write_markers(_markers(1, 2), frozenset({("t", 0)}))
            assert stale == {("t", 0): E.transaction_coordinator_fenced}
            zombie = await writer.write_markers(_markers(0, 4, commit=False), frozenset({("t", 1)}))
            assert zombie == {("t", 1): E.invalid_producer_epoch}
            # A partition no topic has gets no marker; the role asks `exists` then.
            gone = await writer.write_markers(_markers(1, 3), frozenset({("u", 0)}))
            assert gone == {("u", 0): E.unknown_topic_or_partition}
            assert not await writer.exists(("u", 0)) and await writer.exists(("t", 1))
            # A topic this node's cache has not seen yet (made through another node an
            # instant ago) is looked up: its partition gets its marker, not "gone".
            late = WalMarkerWriter(LateCatalog(topic), wal, remote, ManualClock())
            assert await late.exists(("t", 1))
            again = await late.write_markers(_markers(1, 3), frozenset({("t", 1)}))
            assert again == {("t", 1): E.none}
        finally:
            await remote.close()
            await server.stop(None)
            await wal.close()
            await meta.close()

        # A new leader loads the coordinator epoch of the last marker from the producer
        # row, though a data batch rewrote that row since (written whole, carried forward).
        meta2 = SqliteMetaStore(str(tmp_path / "m.db"))
        leader2 = LeaderService(meta2)
        wal2 = WalWriter(store, node_id=2, seal_bytes=1, seal_age_s=3600)
        writer2 = WalMarkerWriter(Catalog(topic), wal2, leader2, ManualClock())
        try:
            stale = await writer2.write_markers(_markers(1, 2), frozenset({("t", 0)}))
            assert stale == {("t", 0): E.transaction_coordinator_fenced}
            again = await writer2.write_markers(_markers(1, 3, commit=False), frozenset({("t", 0)}))
            assert again == {("t", 0): E.none}  # no transaction open: indexes nothing
            assert (await leader2.offsets(s0))[1] == 6
        finally:
            await wal2.close()
            await meta2.close()

    asyncio.run(asyncio.wait_for(body(), 60))
