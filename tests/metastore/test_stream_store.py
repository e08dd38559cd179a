"""StreamStore's contract (storage/index.py): partitions' state, index entries and producer
state committed together and fenced by leader epoch, and where each epoch began; every
backend runs it (conftest.py)."""

from __future__ import annotations

import pytest

from tests.metastore.backends import Stores
from tests.metastore.records import append
from zonegate.metastore.api import MetaStore
from zonegate.storage.index import (
    IndexEntry,
    PartitionCommit,
    PartitionState,
    ProducerBatch,
    ProducerEntry,
    UnknownStream,
)


async def test_a_new_partition_starts_empty(store: MetaStore) -> None:
    t = await store.create_topic("t", {}, [1, 2])
    for p in t.partitions:
        assert await store.load_partition(p.stream_id) == PartitionState(p.stream_id, 0, 0, 0, {})
        assert await store.read_index(p.stream_id) == []
        assert await store.epoch_end_offset(p.stream_id, 0) is None


async def test_unknown_stream_ids(store: MetaStore) -> None:
    t = await store.create_topic("t", {}, [1])
    live = t.partitions[0].stream_id
    unknown = live + 1000
    with pytest.raises(UnknownStream) as info:
        await store.load_partition(unknown)
    assert info.value.stream_id == unknown
    assert await store.read_index(unknown) == []
    assert await store.epoch_end_offset(unknown, 0) is None
    # A commit for a stream no partition has is fenced (its writer must stop), and
    # does not keep the others of the call from landing.
    assert await store.commit_appends([append(unknown, 0), append(live, 0)]) == {unknown}
    assert (await store.load_partition(live)).next_offset == 2
    with pytest.raises(UnknownStream):
        await store.load_partition(unknown)


async def test_commits_append_entries_in_offset_order(store: MetaStore) -> None:
    t = await store.create_topic("t", {}, [1, 1])
    s0, s1 = (p.stream_id for p in t.partitions)
    # Offsets and positions past 2**32, timestamps in ms: 64-bit columns.
    big = 1 << 40
    first = (
        IndexEntry(0, 4, "wal/a", 0, 100, 1_700_000_000_000),
        IndexEntry(5, 5, "wal/a", 100, 50, 1_700_000_000_001),
    )
    second = (IndexEntry(6, big, "wal/b", big, 7, 1_600_000_000_000),)
    assert await store.commit_appends([PartitionCommit(s0, 0, 6, first, ())]) == set()
    assert await store.commit_appends([PartitionCommit(s0, 0, big + 1, second, ())]) == set()
    assert await store.read_index(s0) == [*first, *second]
    assert await store.load_partition(s0) == PartitionState(s0, 0, 0, big + 1, {})
    assert await store.read_index(s1) == [], "the other partition has none"
    assert (await store.load_partition(s1)).next_offset == 0


async def test_producer_state_round_trips_and_is_replaced_whole(store: MetaStore) -> None:
    t = await store.create_topic("t", {}, [1, 1])
    s0, s1 = (p.stream_id for p in t.partitions)
    pid = (1 << 62) + 3  # producer ids are 64-bit
    five = tuple(ProducerBatch(i * 10, i * 10 + 9, i * 10, i * 10 + 9) for i in range(5))
    five_kept = ProducerEntry(pid, 2, five)
    one_kept = ProducerEntry(8, 0, (ProducerBatch(2**31 - 1, 2**31 - 1, 50, 50),))
    entry = IndexEntry(0, 50, "wal/a", 0, 10, 1000)
    first = PartitionCommit(s0, 0, 51, (entry,), (five_kept, one_kept))
    assert await store.commit_appends([first]) == set()
    assert (await store.load_partition(s0)).producers == {pid: five_kept, 8: one_kept}
    # The next commit's entry for a producer replaces the one kept (it carries the
    # producer's last five batches itself); producers it does not name stay.
    bumped = ProducerEntry(pid, 3, (ProducerBatch(0, 0, 51, 51),))
    entry = IndexEntry(51, 51, "wal/b", 0, 10, 1000)
    assert await store.commit_appends([PartitionCommit(s0, 0, 52, (entry,), (bumped,))]) == set()
    assert (await store.load_partition(s0)).producers == {pid: bumped, 8: one_kept}
    assert (await store.load_partition(s1)).producers == {}, "state is per partition"


async def test_a_fenced_commit_lands_nothing_and_the_others_land(stores: Stores) -> None:
    store = stores.open()
    t = await store.create_topic("t", {}, [1, 1])
    s0, s1 = (p.stream_id for p in t.partitions)
    assert await store.commit_appends([append(s0, 0, producer_id=7), append(s1, 0)]) == set()
    assert await store.commit_appends([append(s0, 2, producer_id=7)]) == set()
    # A commit with a stale epoch is fenced; the other partition's part still lands.
    fenced = append(s0, 4, epoch=5, producer_id=7)
    assert await store.commit_appends([fenced, append(s1, 2, producer_id=7)]) == {s0}
    await stores.close(store)

    again = stores.open()  # and all of it was durable
    state = await again.load_partition(s0)
    assert state.next_offset == 4
    assert state.producers[7].batches == (ProducerBatch(2, 3, 2, 3),)
    assert [e.base_offset for e in await again.read_index(s0)] == [0, 2]
    assert (await again.load_partition(s1)).next_offset == 4
    assert (await again.load_partition(s1)).producers[7].batches == (ProducerBatch(2, 3, 2, 3),)


async def test_each_move_records_where_its_epoch_begins(stores: Stores) -> None:
    """OffsetForLeaderEpoch's source; the controller moves, the leader commits."""
    leader, controller = stores.open(), stores.open()
    t = await controller.create_topic("t", {}, [1, 1])
    s0, s1 = (p.stream_id for p in t.partitions)
    assert await leader.epoch_end_offset(s0, 0) is None, "epoch 0 is still current"

    await leader.commit_appends([append(s0, 0, 10)])
    await controller.move_partitions([(s0, 2)])  # epoch 1 starts at 10
    # The old leader's late commit is fenced and does not move epoch 1's start.
    assert await leader.commit_appends([append(s0, 10, 5)]) == {s0}
    await leader.commit_appends([append(s0, 10, 5, epoch=1)])
    await controller.move_partitions([(s0, 1)])  # epoch 2 starts at 15

    assert await leader.epoch_end_offset(s0, 0) == (0, 10)
    assert await leader.epoch_end_offset(s0, 1) == (1, 15)
    assert await leader.epoch_end_offset(s0, 2) is None
    assert await leader.epoch_end_offset(s0, 9) is None
    assert await leader.epoch_end_offset(s1, 0) is None, "the other partition never moved"

    # Reopened, the history is still there; a deleted topic's goes with it.
    again = stores.open()
    assert await again.epoch_end_offset(s0, 1) == (1, 15)
    await again.delete_topic("t")
    assert await again.epoch_end_offset(s0, 0) is None


async def test_one_move_call_records_each_partitions_own_start(store: MetaStore) -> None:
    t = await store.create_topic("t", {}, [1, 1, 1])
    s0, s1, s2 = (p.stream_id for p in t.partitions)
    await store.commit_appends([append(s0, 0, 10), append(s1, 0, 3)])
    await store.move_partitions([(s0, 2), (s1, 2), (s2, 2)])
    assert await store.epoch_end_offset(s0, 0) == (0, 10)
    assert await store.epoch_end_offset(s1, 0) == (0, 3)
    assert await store.epoch_end_offset(s2, 0) == (0, 0), "moved before any write"
    assert await store.commit_appends([append(s1, 3, 2, epoch=1)]) == set()
    assert (await store.load_partition(s1)).next_offset == 5


async def test_delete_topic_drops_its_streams_data_and_fences_their_leader(
    store: MetaStore,
) -> None:
    t = await store.create_topic("t", {}, [1])
    sid = t.partitions[0].stream_id
    await store.commit_appends([append(sid, 0, 4, producer_id=7)])
    await store.move_partitions([(sid, 2)])
    await store.commit_appends([append(sid, 4, 2, epoch=1, producer_id=7)])
    other = await store.create_topic("u", {}, [1])
    kept = other.partitions[0].stream_id
    await store.commit_appends([append(kept, 0, producer_id=7)])

    await store.delete_topic("t")
    assert await store.read_index(sid) == []
    assert await store.epoch_end_offset(sid, 0) is None
    # A leader loading it anew (restarted, or told to forget it) finds no partition,
    # so it never learns the epoch the deletion moved to and writes nothing under it.
    with pytest.raises(UnknownStream):
        await store.load_partition(sid)
    # Its leader's next commit, at the epoch it led with, lands nowhere.
    assert await store.commit_appends([append(sid, 6, 2, epoch=1, producer_id=7)]) == {sid}
    assert await store.read_index(sid) == []
    # Another topic's stream is untouched.
    assert len(await store.read_index(kept)) == 1
    assert 7 in (await store.load_partition(kept)).producers
