"""Which leader answers the directory (leader_forwarder/directory.py) sends again: those
of kafka_errors.LEADER_MOVED, to the leader a refreshed catalog names; every other
answer, retriable or not, goes back to the client as the leader gave it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest
from kio.schema.errors import ErrorCode

from zonegate.kafka_errors import LEADER_MOVED
from zonegate.leader_forwarder.directory import LeaderDirectory
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch, AppendResult
from zonegate.metastore.models import PartitionInfo
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit


class _Leader:
    """Answers its first append with `first`, then takes the batch at offset 0."""

    def __init__(self, first: ErrorCode) -> None:
        self.first = first
        self.calls = 0

    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        self.calls += 1
        if self.calls == 1:
            return [AppendResult(self.first)] * len(batches)
        return [AppendResult(ErrorCode.none, 0, 0)] * len(batches)


def _answer(first: ErrorCode) -> tuple[ErrorCode, int]:
    async def run() -> tuple[ErrorCode, int]:
        leader = _Leader(first)
        clock = ManualClock()
        part = PartitionInfo(uuid.uuid4(), "t", 0, 5, leader_node=1, leader_epoch=3)

        async def refresh() -> None:
            pass

        directory = LeaderDirectory(
            1,
            leader,  # type: ignore[arg-type]
            lambda sid: part if sid == 5 else None,
            lambda _n: None,
            refresh,
            clock=clock,
        )
        batch = AppendBatch(5, ANY_EPOCH, "obj", 0, 100, 2, 1000, 7, 0, 0)
        task = asyncio.ensure_future(directory.append([batch]))
        for _ in range(100):
            if task.done():
                break
            await clock.advance(0.5)
        (result,) = task.result()
        return result.error, leader.calls

    return asyncio.run(run())


@pytest.mark.parametrize("code", [c for c in ErrorCode if c is not ErrorCode.none])
def test_only_a_moved_leader_is_asked_again(code: ErrorCode) -> None:
    if code in LEADER_MOVED:
        assert _answer(code) == (ErrorCode.none, 2)
    else:
        assert _answer(code) == (code, 1)
