"""The metadata store's record of where each leader epoch began (OffsetForLeaderEpoch's source)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.storage.index import IndexEntry, PartitionCommit

pytestmark = pytest.mark.unit


def _commit(sid: int, epoch: int, base: int, n: int) -> PartitionCommit:
    return PartitionCommit(
        stream_id=sid,
        leader_epoch=epoch,
        next_offset=base + n,
        entries=(IndexEntry(base, base + n - 1, f"wal/{sid}-{base}", 0, 10, 1000),),
        producers=(),
    )


def test_each_move_records_where_its_epoch_begins(tmp_path: Path) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        t = await meta.create_topic("t", {}, [1, 1])
        s0, s1 = (p.stream_id for p in t.partitions)
        assert await meta.epoch_end_offset(s0, 0) is None, "epoch 0 is still current"

        await meta.commit_appends([_commit(s0, 0, 0, 10)])
        await meta.move_partitions([(s0, 2)])  # epoch 1 starts at 10
        # The old leader's late commit is fenced and does not move epoch 1's start.
        assert await meta.commit_appends([_commit(s0, 0, 10, 5)]) == {s0}
        await meta.commit_appends([_commit(s0, 1, 10, 5)])
        await meta.move_partitions([(s0, 1)])  # epoch 2 starts at 15

        assert await meta.epoch_end_offset(s0, 0) == (0, 10)
        assert await meta.epoch_end_offset(s0, 1) == (1, 15)
        assert await meta.epoch_end_offset(s0, 2) is None
        assert await meta.epoch_end_offset(s0, 9) is None
        assert await meta.epoch_end_offset(s1, 0) is None, "the other partition never moved"

        # Reopened, the history is still there; a deleted topic's goes with it.
        again = SqliteMetaStore(str(tmp_path / "m.db"))
        assert await again.epoch_end_offset(s0, 1) == (1, 15)
        await again.delete_topic("t")
        assert await again.epoch_end_offset(s0, 0) is None

    asyncio.run(run())
