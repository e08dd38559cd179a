"""The storage lifecycle's contract on every backend: moving a stream's head (retention,
DeleteRecords), append times, cluster-wide config defaults, and object GC's questions
(docs/storage.md)."""

from __future__ import annotations

import pytest

from tests.metastore.backends import Stores
from tests.metastore.records import append
from zonegate.metastore.api import MetaStore
from zonegate.storage.index import IndexEntry, LeaderEpochFenced, PartitionCommit, UnknownStream
from zonegate.storage.pack_files import deletion_unit


async def test_append_time_round_trips(store: MetaStore) -> None:
    t = await store.create_topic("t", {}, [1])
    sid = t.partitions[0].stream_id
    e = IndexEntry(0, 3, "wal/x", 0, 10, 1_700_000_000_000, 1_700_000_000_555)
    await store.commit_appends([PartitionCommit(sid, 0, 4, (e,), ())])
    assert await store.read_index(sid) == [e]


async def test_truncate_head_moves_the_start_and_drops_what_lies_wholly_below(
    store: MetaStore,
) -> None:
    t = await store.create_topic("t", {}, [1, 1])
    sid, other = (p.stream_id for p in t.partitions)
    for base in (0, 2, 4):
        await store.commit_appends([append(sid, base), append(other, base)])
    # Offset 3 lies inside the entry [2, 3]: it stays, [0, 1] goes.
    assert await store.truncate_head(sid, 0, 3) == 3
    assert [e.base_offset for e in await store.read_index(sid)] == [2, 4]
    assert (await store.load_partition(sid)).log_start_offset == 3
    # Never down.
    assert await store.truncate_head(sid, 0, 1) == 3
    assert [e.base_offset for e in await store.read_index(sid)] == [2, 4]
    # To the end: every entry goes; the other partition is untouched.
    assert await store.truncate_head(sid, 0, 6) == 6
    assert await store.read_index(sid) == []
    assert len(await store.read_index(other)) == 3
    assert (await store.load_partition(sid)).next_offset == 6


async def test_truncate_head_is_fenced_by_the_leader_epoch(stores: Stores) -> None:
    store = stores.open()
    t = await store.create_topic("t", {}, [1])
    sid = t.partitions[0].stream_id
    await store.commit_appends([append(sid, 0)])
    await stores.open().move_partitions([(sid, 2)])  # another node moves it
    with pytest.raises(LeaderEpochFenced):
        await store.truncate_head(sid, 0, 2)
    assert len(await store.read_index(sid)) == 1, "a deposed leader changed nothing"
    assert (await store.load_partition(sid)).log_start_offset == 0
    assert await store.truncate_head(sid, 1, 2) == 2
    with pytest.raises(UnknownStream):
        await store.truncate_head(sid + 1000, 0, 1)


async def test_config_defaults_are_shared_per_scope_and_move_the_version(
    stores: Stores,
) -> None:
    a, b = stores.open(), stores.open()
    assert await a.get_cluster_configs() == {}
    before = await a.metadata_version()
    assert await a.set_cluster_configs("", {"retention.ms": "1000", "segment.ms": "50"}) == {
        "retention.ms": "1000",
        "segment.ms": "50",
    }
    assert await a.metadata_version() != before
    assert await b.get_cluster_configs() == {"": {"retention.ms": "1000", "segment.ms": "50"}}
    assert await b.set_cluster_configs("", {"segment.ms": None, "retention.bytes": "7"}) == {
        "retention.ms": "1000",
        "retention.bytes": "7",
    }
    # A node's own defaults are a scope of their own: the cluster's are untouched.
    assert await b.set_cluster_configs("2", {"retention.ms": "5"}) == {"retention.ms": "5"}
    assert await a.get_cluster_configs() == {
        "": {"retention.ms": "1000", "retention.bytes": "7"},
        "2": {"retention.ms": "5"},
    }
    assert await a.set_cluster_configs("2", {"retention.ms": None}) == {}
    assert "2" not in await a.get_cluster_configs()


async def test_referenced_units_name_objects_and_pack_files(store: MetaStore) -> None:
    t = await store.create_topic("t", {}, [1])
    sid = t.partitions[0].stream_id
    named = ("wal/1/000000000001-ab", "wal/1/run-000001.pack@8+100")
    entries = (
        IndexEntry(0, 0, named[0], 0, 10, 0),
        IndexEntry(1, 1, named[1], 0, 100, 0),
    )
    await store.commit_appends([PartitionCommit(sid, 0, 2, entries, ())])
    # The units and member ranges the local store gives (storage/pack_files.py).
    pack1, pack2 = (deletion_unit(f"wal/1/run-00000{n}.pack@8+1") for n in (1, 2))
    units: dict[str, tuple[str, str] | None] = {
        "wal/1/000000000001-ab": None,  # named itself
        "wal/1/000000000002-ab": None,  # not named
        pack1.key: pack1.member_keys,  # one of its objects is named
        pack2.key: pack2.member_keys,  # none of its objects is
        "wal/1/run-000001": None,  # a prefix of a named key is not that key
        "range-ends-at-it": (named[1][:-1], named[1]),  # [first, end): end not in it
        "range-holds-it": (named[0], named[0] + "~"),
    }
    assert await store.referenced_units(units) == {
        "wal/1/000000000001-ab",
        pack1.key,
        "range-holds-it",
    }
    await store.truncate_head(sid, 0, 2)
    assert await store.referenced_units(units) == set()


async def test_gc_pending_rows(stores: Stores) -> None:
    a, b = stores.open(), stores.open()
    assert await a.gc_pending() == {}
    await a.update_gc_pending({"wal/x": (1000, 10), "wal/y": (1001, 20)}, [])
    # A second mark of a unit keeps the first time it was seen.
    await b.update_gc_pending({"wal/x": (5000, 10)}, ["wal/nothing"])
    assert await b.gc_pending() == {"wal/x": (1000, 10), "wal/y": (1001, 20)}
    await a.update_gc_pending({}, ["wal/x"])
    assert await b.gc_pending() == {"wal/y": (1001, 20)}
