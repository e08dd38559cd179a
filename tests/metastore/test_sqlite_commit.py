"""SQLite only: commit_appends on the loop thread's own connection, and its way around a
held lock. (What any backend's commits must do is in test_stream_store.py.)"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from tests.metastore.records import append
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.storage.index import ProducerBatch

pytestmark = pytest.mark.integration  # a database file, a worker thread


async def test_commits_inline_fall_back_when_locked_and_survive_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    meta = SqliteMetaStore(path)
    t = await meta.create_topic("t", {}, [1, 1])
    s0, s1 = (p.stream_id for p in t.partitions)
    commits = [append(s0, 0, producer_id=7), append(s1, 0, producer_id=7)]
    assert await meta.commit_appends(commits) == set()
    assert meta._loop_conn is not None, "committed on the loop thread's connection"

    # Another connection holds the write lock: the commit must not fail, nor block
    # the loop; it waits on the worker thread and lands once the lock is free.
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    tick = asyncio.create_task(ticker())
    assert await meta.commit_appends([append(s0, 2, producer_id=7)]) == set()
    tick.cancel()
    release.join()
    other.close()
    assert ticks >= 10, "the loop kept running while the commit waited for the lock"
    await meta.close()

    # Both ways of committing were durable.
    again = SqliteMetaStore(path)
    state = await again.load_partition(s0)
    assert state.next_offset == 4
    assert state.producers[7].batches == (ProducerBatch(2, 3, 2, 3),)
    assert [e.base_offset for e in await again.read_index(s0)] == [0, 2]
    assert (await again.load_partition(s1)).next_offset == 2
    await again.close()
