"""Retention's executor over a real leader on a real SQLite metadata store, on a manual
clock: the policy's start is applied through the leader's fenced truncation, and object
GC is woken when data went."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.maintenance.retention import Retention
from zonegate.maintenance.targets import RetentionRule
from zonegate.metastore.models import PartitionInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit


def test_retention_drops_the_expired_segments_through_the_leader(tmp_path: Path) -> None:
    async def run() -> None:
        clock = ManualClock(wall_ms=1_700_000_000_000)
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        leader = LeaderService(meta, clock, lambda _sid: (1000, 1 << 30))
        topic = await meta.create_topic("t", {}, [1])
        part = topic.partitions[0]
        rule = RetentionRule(retention_ms=2500, retention_bytes=-1)
        targets: list[tuple[PartitionInfo, RetentionRule]] = [(part, rule)]
        woken: list[bool] = []
        retention = Retention(
            lambda: targets, leader.changes, clock, on_dropped=lambda: woken.append(True)
        )
        n = 0
        for _ in range(3):  # three segments of one second's window each, 3 x 100 bytes
            batches = [
                AppendBatch(
                    part.stream_id,
                    ANY_EPOCH,
                    f"wal/{n + i}",
                    0,
                    100,
                    1,
                    clock.wall_ms(),
                    -1,
                    -1,
                    -1,
                )
                for i in range(3)
            ]
            n += 3
            assert all(r.error == 0 for r in await leader.append(batches))
            await clock.advance(1.0)

        await retention.run_once()
        # Now 3 s after the first appends: the first second's segment is older than 2.5 s,
        # the second's (2 s old) is not.
        assert retention.stats.segments_deleted == 1 and retention.stats.bytes_deleted == 300
        start, hwm, _ = await leader.offsets(part.stream_id)
        assert (start, hwm) == (3, 9)
        assert (await meta.load_partition(part.stream_id)).log_start_offset == 3
        assert woken == [True]

        await retention.run_once()  # nothing more is due: nothing moves, GC is not woken
        assert retention.stats.segments_deleted == 1 and woken == [True]

        # A truncation decided at an epoch the leader no longer holds changes nothing.
        head = await leader.changes.head(part.stream_id)
        assert not await leader.changes.truncate(part.stream_id, head.leader_epoch + 1, 6)
        assert (await leader.offsets(part.stream_id))[0] == 3
        await meta.close()

    asyncio.run(run())
