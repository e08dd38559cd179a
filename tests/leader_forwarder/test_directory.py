"""The proxy's side of appends (leader_forwarder/directory.py): a batch whose fate is
unknown is never answered with an error that says it was not written, and one leader's
failure leaves the answers the other leaders gave alone. Two real leaders over one real
SQLite metadata store (as two nodes share one), faults injected at their edges, the
clock injected."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.leader_forwarder.directory import LeaderDirectory
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch, AppendResult
from zonegate.metastore.models import MetaStoreUnavailable, PartitionInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit


def _b(sid: int, seq: int, pid: int = 7) -> AppendBatch:
    return AppendBatch(sid, ANY_EPOCH, "obj", 0, 100, 2, 1000, pid, 0, seq)


class _Cut:
    """A leader on the far side of a link that can be cut after the call arrived: the
    leader commits, the caller hears LeaderUnavailable (a deadline passed)."""

    def __init__(self, leader: LeaderService) -> None:
        self.leader = leader
        self.cut_next = False
        self.was_cut = asyncio.Event()

    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        results = await self.leader.append(batches)
        if self.cut_next:
            self.cut_next = False
            self.was_cut.set()
            raise LeaderUnavailable("leader 127.0.0.1:1: DEADLINE_EXCEEDED")
        return results

    def __getattr__(self, name: str) -> object:
        return getattr(self.leader, name)


def _setup(tmp_path: Path) -> tuple[SqliteMetaStore, LeaderService, _Cut, dict[int, PartitionInfo]]:
    meta = SqliteMetaStore(str(tmp_path / "m.db"))
    return meta, LeaderService(meta), _Cut(LeaderService(meta)), {}


def test_one_leader_failing_leaves_the_others_answers_alone(tmp_path: Path) -> None:
    async def run() -> None:
        meta, _, remote, parts = _setup(tmp_path)
        topic = await meta.create_topic("t", {}, [1, 2])
        parts.update({p.stream_id: p for p in topic.partitions})
        on_1, on_2 = (p.stream_id for p in topic.partitions)

        async def refresh() -> None:
            raise MetaStoreUnavailable("PostgreSQL unreachable")  # the store is down

        class Broken:  # the local leader, with a bug
            async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
                raise RuntimeError("a bug in the local leader")

        directory = LeaderDirectory(
            1,
            Broken(),  # type: ignore[arg-type]
            parts.get,
            lambda _n: remote,
            refresh,
            clock=ManualClock(),
        )
        res = await directory.append([_b(on_1, 0), _b(on_2, 0)])
        assert res[0].error == ErrorCode.request_timed_out, "its fate unknown"
        assert (res[1].error, res[1].base_offset) == (ErrorCode.none, 0), "written: said so"
        await meta.close()

    asyncio.run(run())


def test_a_batch_that_may_have_been_written_is_never_answered_not_written(
    tmp_path: Path,
) -> None:
    """The remote leader commits, the link is cut before its answer arrives, and the
    retries find it moved away (NOT_LEADER_OR_FOLLOWER) until the deadline; the store is
    down for the catalog refresh between them. The answer is REQUEST_TIMED_OUT, and a
    retry of the same batch by the producer is answered with its offset."""

    async def run() -> None:
        meta, local, remote, parts = _setup(tmp_path)
        topic = await meta.create_topic("t", {}, [2])
        sid = topic.partitions[0].stream_id
        parts[sid] = topic.partitions[0]
        clock = ManualClock()
        refreshes = 0

        async def refresh() -> None:
            nonlocal refreshes
            refreshes += 1
            raise MetaStoreUnavailable("PostgreSQL unreachable")

        directory = LeaderDirectory(
            1, local, parts.get, lambda _n: remote, refresh, retry_for_s=2.0, clock=clock
        )
        remote.cut_next = True
        answer = asyncio.ensure_future(directory.append([_b(sid, 0)]))
        await remote.was_cut.wait()
        assert (await remote.leader.offsets(sid))[1] == 2, "the first attempt was written"
        # The partition moves (to the same node, a new epoch) and its leader drops what
        # it had cached, as a catalog change makes it: the retries, sent with the
        # proxy's stale epoch, are fenced.
        await meta.move_partitions([(sid, 2)])
        remote.leader.forget([sid])
        while not answer.done():
            await clock.advance(0.5)
        (res,) = answer.result()
        assert res.error == ErrorCode.request_timed_out and refreshes > 0
        # The producer retries the batch (same producer id, epoch and sequence) once the
        # catalog is current: the leader de-duplicates it.
        parts[sid] = (await meta.get_topic("t")).partitions[0]  # type: ignore[union-attr]
        (again,) = await directory.append([_b(sid, 0)])
        assert (again.error, again.base_offset) == (ErrorCode.none, 0)
        assert (await remote.leader.offsets(sid))[1] == 2, "written once"
        await meta.close()

    asyncio.run(run())
