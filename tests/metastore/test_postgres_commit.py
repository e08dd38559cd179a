"""PostgreSQL only: the leader's group commit is one statement (one round trip), and
its fence holds when it waits on a row another transaction holds. (What any backend's
commits must do is in test_stream_store.py.)"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.metastore.records import append
from tests.postgres_server import PostgresServer
from zonegate.metastore.postgres import COMMITS, PostgresMetaStore
from zonegate.storage.index import IndexEntry, PartitionCommit

pytestmark = pytest.mark.integration  # a PostgreSQL server


async def _pending(task: asyncio.Task[set[int]]) -> bool:
    await asyncio.sleep(0.3)  # long enough for the commit to reach the held lock
    return not task.done()


async def test_a_commit_waiting_on_a_move_is_fenced_by_it(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    meta = PostgresMetaStore(url)
    t = await meta.create_topic("t", {}, [1, 1])
    s0, s1 = (p.stream_id for p in t.partitions)
    assert await meta.commit_appends([append(s0, 0, producer_id=7)]) == set()

    other = await asyncpg.connect(url)
    try:
        # A leader move in flight: s0's row locked, its epoch bumped, not committed.
        tx = other.transaction()
        await tx.start()
        await other.execute("UPDATE partitions SET leader_epoch = 1 WHERE stream_id = $1", s0)
        commit = asyncio.create_task(
            meta.commit_appends([append(s0, 2, producer_id=7), append(s1, 0, producer_id=7)])
        )
        assert await _pending(commit), "the commit waits for the row lock"
        await tx.commit()
        # The commit reads the row as the move left it: s0 fenced, s1 landed.
        assert await commit == {s0}
    finally:
        await other.close()
    state = await meta.load_partition(s0)
    assert (state.leader_epoch, state.next_offset) == (1, 2)
    assert [e.base_offset for e in await meta.read_index(s0)] == [0]
    assert state.producers[7].batches[-1].first_seq == 0
    assert (await meta.load_partition(s1)).next_offset == 2
    await meta.close()


async def test_a_commit_waiting_on_another_write_of_the_same_epoch_lands(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database()
    meta = PostgresMetaStore(url)
    t = await meta.create_topic("t", {}, [1])
    s0 = t.partitions[0].stream_id
    assert await meta.commit_appends([append(s0, 0)]) == set()

    other = await asyncpg.connect(url)
    try:
        tx = other.transaction()  # as truncate_head: the row locked, the epoch kept
        await tx.start()
        await other.execute("UPDATE partitions SET log_start_offset = 1 WHERE stream_id = $1", s0)
        commit = asyncio.create_task(meta.commit_appends([append(s0, 2)]))
        assert await _pending(commit)
        await tx.commit()
        assert await commit == set()
    finally:
        await other.close()
    state = await meta.load_partition(s0)
    assert (state.log_start_offset, state.next_offset) == (1, 4), "both writes kept"
    assert [e.base_offset for e in await meta.read_index(s0)] == [0, 2]
    await meta.close()


async def test_a_commit_is_one_round_trip(postgres_server: PostgresServer) -> None:
    """Each statement the server runs for a commit is one round trip on its link; a
    leader's produce waits for all of them (a slow link to the store multiplies)."""
    url = postgres_server.new_database()
    meta = PostgresMetaStore(url)
    t = await meta.create_topic("t", {}, [1, 1])
    s0, s1 = (p.stream_id for p in t.partitions)
    await meta.commit_appends([append(s0, 0, producer_id=7)])  # statement prepared

    pool = await meta._get_pool(COMMITS)
    sent: list[str] = []
    async with pool.acquire() as conn:
        raw = conn._con  # the pool's one connection at rest: the next commit uses it
        assert raw is not None
        raw.add_query_logger(lambda q: sent.append(q.query))
    assert await meta.commit_appends([append(s0, 2, producer_id=7), append(s1, 0)]) == set()
    assert len(sent) == 1, sent
    assert (await meta.load_partition(s0)).next_offset == 4
    await meta.close()


async def test_a_commit_sent_again_lands_nothing_twice(postgres_server: PostgresServer) -> None:
    """What the leader does when the connection is lost with its commit sent: the
    server may have committed it, so it is sent again; the second lands nothing."""
    url = postgres_server.new_database()
    meta = PostgresMetaStore(url)
    t = await meta.create_topic("t", {}, [1, 1])
    s0, s1 = (p.stream_id for p in t.partitions)
    first = [append(s0, 0, producer_id=7), append(s1, 0)]
    assert await meta.commit_appends(first) == set()
    again = [append(s0, 0, producer_id=7), append(s1, 0), append(s1, 2)]
    # s0's and the first s1 commit again: not fenced, nothing written twice; the new
    # s1 commit at offset 2 lands.
    assert await meta.commit_appends(again[:2]) == set()
    assert await meta.commit_appends(again[2:]) == set()
    assert [e.base_offset for e in await meta.read_index(s0)] == [0]
    assert [e.base_offset for e in await meta.read_index(s1)] == [0, 2]
    assert (await meta.load_partition(s0)).next_offset == 2
    assert (await meta.load_partition(s1)).next_offset == 4
    # Another entry at an indexed offset is no resend: the store refuses it.
    clash = PartitionCommit(s0, 0, 2, (IndexEntry(0, 1, "wal/other", 0, 10, 1000),), ())
    with pytest.raises(asyncpg.UniqueViolationError):
        await meta.commit_appends([clash])
    await meta.close()


async def test_a_commit_does_not_wait_for_the_shared_connections(
    postgres_server: PostgresServer,
) -> None:
    """The group commit has connections of its own: with every connection of the node's
    shared pool taken (reads slowed by a slow link, say), a commit still lands at once."""
    url = postgres_server.new_database()
    meta = PostgresMetaStore(url)
    t = await meta.create_topic("t", {}, [1])
    s0 = t.partitions[0].stream_id
    shared = await meta._get_pool()
    held = [await shared.acquire() for _ in range(shared.get_max_size())]
    try:
        waiting = asyncio.create_task(meta.metadata_version())
        assert await _pending(waiting), "the shared pool is taken"
        assert await asyncio.wait_for(meta.commit_appends([append(s0, 0)]), 10) == set()
    finally:
        for conn in held:
            await shared.release(conn)
    await waiting
    assert (await meta.load_partition(s0)).next_offset == 2
    await meta.close()
