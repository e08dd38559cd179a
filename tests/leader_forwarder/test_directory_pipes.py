"""The directory's appends pipelines (leader_forwarder/directory.py): one per leader, so a
slow leader holds only its own partitions' appends; a partition's batches still reach
its leader in the producer's order when the leader moves while earlier ones are
unanswered; a call's answers come back in its own order. Fake leaders whose answers the
test releases one call at a time, the catalog a dict, the clock injected."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Sequence

import pytest
from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.directory import LeaderDirectory
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch, AppendResult
from zonegate.metastore.models import PartitionInfo
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit

ME, SLOW, FAST = 1, 2, 3


class _Leader:
    """Leader `node`: records what reaches it, in order; answers NOT_LEADER_OR_FOLLOWER
    for partitions the catalog no longer gives it, and an offset naming the node and the
    batch otherwise. With `hold`, each call waits until the test releases it."""

    def __init__(self, node: int, parts: dict[int, PartitionInfo], hold: bool = False) -> None:
        self.node = node
        self.parts = parts
        self.hold = hold
        self.held: list[asyncio.Future[None]] = []
        self.got: list[tuple[int, int]] = []  # (stream id, base sequence) as they arrived

    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        if self.hold:
            gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.held.append(gate)
            await gate
        out = []
        for b in batches:
            if self.parts[b.stream_id].leader_node != self.node:
                out.append(AppendResult(ErrorCode.not_leader_or_follower))
                continue
            self.got.append((b.stream_id, b.base_sequence))
            out.append(
                AppendResult(ErrorCode.none, self.node * 1000 + b.stream_id * 10 + b.base_sequence)
            )
        return out

    def release(self) -> None:
        self.held.pop(0).set_result(None)


def _part(sid: int, node: int) -> PartitionInfo:
    return PartitionInfo(uuid.uuid4(), "t", sid, sid, leader_node=node, leader_epoch=1)


def _b(sid: int, seq: int) -> AppendBatch:
    return AppendBatch(sid, ANY_EPOCH, "obj", 0, 100, 1, 1000, 7, 0, seq)


def _setup(
    led: dict[int, int], clock: ManualClock
) -> tuple[LeaderDirectory, dict[int, PartitionInfo], dict[int, _Leader]]:
    parts = {sid: _part(sid, node) for sid, node in led.items()}
    leaders = {n: _Leader(n, parts, hold=n == SLOW) for n in (ME, SLOW, FAST)}

    async def refresh() -> None:
        pass  # the test changes `parts` itself

    directory = LeaderDirectory(
        ME,
        leaders[ME],  # type: ignore[arg-type]
        parts.get,
        leaders.get,  # type: ignore[arg-type]
        refresh,
        clock=clock,
    )
    return directory, parts, leaders


async def _settle() -> None:
    """Lets every task run until it waits on something the test controls."""
    for _ in range(50):
        await asyncio.sleep(0)


def test_a_slow_leader_does_not_hold_appends_to_other_leaders() -> None:
    async def run() -> None:
        directory, _, leaders = _setup({10: SLOW, 20: FAST, 30: ME}, ManualClock())
        slow = asyncio.ensure_future(directory.append([_b(10, 0)]))
        await _settle()
        assert len(leaders[SLOW].held) == 1, "the slow leader has the call, unanswered"
        fast = asyncio.ensure_future(directory.append([_b(20, 0)]))
        local = asyncio.ensure_future(directory.append([_b(30, 0)]))
        await _settle()
        assert fast.done() and local.done() and not slow.done()
        assert fast.result()[0].base_offset == FAST * 1000 + 200
        assert local.result()[0].base_offset == ME * 1000 + 300
        leaders[SLOW].release()
        assert (await slow)[0].base_offset == SLOW * 1000 + 100
        assert directory.append_rpcs == 2, "one RPC per remote leader; none to this node"

    asyncio.run(run())


def test_a_partition_keeps_its_order_when_its_leader_moves_under_unanswered_batches() -> None:
    """Partition 11 moves from the slow leader to the fast one while its batch 0 is
    unanswered at the slow one: batch 1 waits behind it (not straight to the new leader,
    which would take it first), batch 0 is resent to the new leader, and once the slow
    pipeline starts its next cycle, 11's queued batches go on to the new leader's
    pipeline instead of waiting for the slow leader again."""

    async def run() -> None:
        clock = ManualClock()
        directory, parts, leaders = _setup({10: SLOW, 11: SLOW}, clock)
        first = asyncio.ensure_future(directory.append([_b(10, 0), _b(11, 0)]))
        await _settle()
        parts[11] = dataclasses.replace(parts[11], leader_node=FAST, leader_epoch=2)
        second = asyncio.ensure_future(directory.append([_b(11, 1)]))
        third = asyncio.ensure_future(directory.append([_b(10, 1)]))
        await _settle()
        assert leaders[FAST].got == [], "11's batch 1 waits for its batch 0"
        leaders[SLOW].release()  # 10's batch 0 written; 11's refused: moved
        await _settle()
        await clock.advance(0.05)  # the retry's pause
        await _settle()
        assert first.done() and [r.error for r in first.result()] == [ErrorCode.none] * 2
        assert leaders[FAST].got == [(11, 0), (11, 1)], "in the producer's order"
        assert second.done() and second.result()[0].base_offset == FAST * 1000 + 111
        assert not third.done() and len(leaders[SLOW].held) == 1, "10's batch 1 is held"
        leaders[SLOW].release()
        assert (await third)[0].base_offset == SLOW * 1000 + 101
        assert leaders[SLOW].got == [(10, 0), (10, 1)]

    asyncio.run(run())


def test_a_mixed_append_is_answered_in_the_callers_order() -> None:
    async def run() -> None:
        directory, _, leaders = _setup({10: SLOW, 20: FAST, 30: ME}, ManualClock())
        batches = [_b(10, 0), _b(20, 0), _b(30, 0), _b(10, 1), _b(20, 1), _b(30, 1)]
        task = asyncio.ensure_future(directory.append(batches))
        await _settle()
        assert not task.done(), "the other leaders answered first; the slow one is awaited"
        leaders[SLOW].release()
        results = await task
        node = {10: SLOW, 20: FAST, 30: ME}
        assert [r.base_offset for r in results] == [
            node[b.stream_id] * 1000 + b.stream_id * 10 + b.base_sequence for b in batches
        ]
        # Idle pipelines end and nothing stays held: the next append starts afresh.
        await _settle()
        assert not directory._pipes and not directory._held
        (again,) = await directory.append([_b(20, 2)])
        assert again.base_offset == FAST * 1000 + 202

    asyncio.run(run())
