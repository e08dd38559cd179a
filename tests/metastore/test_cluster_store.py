"""ClusterStore's contract: topics and partitions, leader moves, the metadata version,
nodes, leases and cluster secrets; every backend runs it (conftest.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest

from tests.metastore.backends import Stores
from tests.metastore.records import append, node
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import (
    CommittedOffset,
    GroupRecord,
    MetaStoreError,
    PartitionCountChanged,
    TopicExists,
    TopicInfo,
)


def _layout(t: TopicInfo) -> list[tuple[int, int, int]]:
    return [(p.partition, p.leader_node, p.leader_epoch) for p in t.partitions]


def _stream_ids(*topics: TopicInfo) -> set[int]:
    return {p.stream_id for t in topics for p in t.partitions}


# -- topics ---------------------------------------------------------------
async def test_create_topic_numbers_partitions_by_leader_and_keeps_configs(
    store: MetaStore,
) -> None:
    t = await store.create_topic("orders", {"retention.ms": "1000"}, [3, 1, 2])
    assert t.name == "orders" and t.configs == {"retention.ms": "1000"}
    assert _layout(t) == [(0, 3, 0), (1, 1, 0), (2, 2, 0)]
    assert all(p.topic == "orders" and p.topic_id == t.topic_id for p in t.partitions)
    assert len(_stream_ids(t)) == 3
    assert await store.get_topic("orders") == t
    assert await store.get_topic_by_id(t.topic_id) == t
    assert await store.list_topics() == [t]


async def test_unknown_topics_are_none(store: MetaStore) -> None:
    assert await store.list_topics() == []
    t = await store.create_topic("t", {}, [1])
    assert await store.get_topic("nope") is None
    assert await store.get_topic_by_id(uuid.uuid4()) is None
    assert await store.delete_topic("nope") is None
    assert await store.list_topics() == [t]


async def test_list_topics_has_every_live_topic(store: MetaStore) -> None:
    a = await store.create_topic("a", {}, [1])
    await store.create_topic("b", {}, [1, 2])
    c = await store.create_topic("c", {"k": "v"}, [2])
    await store.delete_topic("b")
    assert sorted(await store.list_topics(), key=lambda t: t.name) == [a, c]


async def test_create_topic_on_a_live_name_raises_topic_exists(store: MetaStore) -> None:
    t = await store.create_topic("t", {"a": "1"}, [1])
    with pytest.raises(TopicExists):
        await store.create_topic("t", {"b": "2"}, [2, 2])
    assert await store.get_topic("t") == t
    assert await store.list_topics() == [t]


async def test_concurrent_creates_of_one_name_make_one_topic(stores: Stores) -> None:
    """Two nodes auto-creating one topic at once: one wins, the other sees it exists."""
    a, b = stores.open(), stores.open()
    results = await asyncio.gather(
        a.create_topic("t", {}, [1]), b.create_topic("t", {}, [2]), return_exceptions=True
    )
    made = [r for r in results if isinstance(r, TopicInfo)]
    assert len(made) == 1, results
    assert [type(r) for r in results if not isinstance(r, TopicInfo)] == [TopicExists]
    assert await a.list_topics() == made
    assert await b.list_topics() == made


async def test_delete_topic_answers_it_and_forgets_its_name_and_id(store: MetaStore) -> None:
    t = await store.create_topic("t", {"a": "1"}, [1, 2])
    assert await store.delete_topic("t") == t
    assert await store.get_topic("t") is None
    assert await store.get_topic_by_id(t.topic_id) is None
    assert await store.list_topics() == []
    assert await store.delete_topic("t") is None, "already gone"


async def test_a_deleted_name_can_be_created_again_with_new_ids(store: MetaStore) -> None:
    old = await store.create_topic("t", {"a": "1"}, [1, 2])
    await store.delete_topic("t")
    new = await store.create_topic("t", {}, [2])
    assert new.topic_id != old.topic_id
    assert not _stream_ids(new) & _stream_ids(old)
    assert new.configs == {} and _layout(new) == [(0, 2, 0)]
    assert await store.get_topic("t") == new
    assert await store.list_topics() == [new], "listed once"
    assert await store.get_topic_by_id(new.topic_id) == new
    assert await store.get_topic_by_id(old.topic_id) is None, "the old id stays dead"


async def test_stream_ids_are_never_reused(store: MetaStore) -> None:
    """Not even the newest topic's, once deleted: a stream id names one partition's data
    for the cluster's lifetime (object keys and caches are keyed by it)."""
    a = await store.create_topic("a", {}, [1, 1])
    b = await store.create_topic("b", {}, [1, 1])
    await store.delete_topic("b")
    c = await store.create_topic("c", {}, [1, 1])
    grown = await store.add_partitions("a", [1])
    assert len(_stream_ids(a, b, c)) == 6
    new = _stream_ids(grown) - _stream_ids(a)
    assert len(new) == 1 and not new & _stream_ids(b, c)


async def test_add_partitions_appends_after_the_existing_ones(store: MetaStore) -> None:
    t = await store.create_topic("t", {"a": "1"}, [1])
    grown = await store.add_partitions("t", [2, 3])
    assert _layout(grown) == [(0, 1, 0), (1, 2, 0), (2, 3, 0)]
    assert grown.partitions[0] == t.partitions[0], "the existing partition is untouched"
    assert grown.topic_id == t.topic_id and grown.configs == t.configs
    assert len(_stream_ids(grown)) == 3
    assert await store.get_topic("t") == grown
    assert _layout(await store.add_partitions("t", [1], have=3)) == _layout(grown) + [(3, 1, 0)]
    with pytest.raises(MetaStoreError):
        await store.add_partitions("nope", [1])


async def test_add_partitions_with_a_stale_count_raises_and_adds_nothing(
    store: MetaStore,
) -> None:
    await store.create_topic("t", {}, [1, 1])
    grown = await store.add_partitions("t", [1], have=2)
    with pytest.raises(PartitionCountChanged) as info:
        await store.add_partitions("t", [2], have=2)
    assert info.value.actual == 3
    assert await store.get_topic("t") == grown


async def test_concurrent_growth_to_one_count_adds_once(stores: Stores) -> None:
    """Two nodes growing a topic from 1 to 2 partitions at once must not make 3."""
    a, b = stores.open(), stores.open()
    await a.create_topic("t", {}, [1])
    results = await asyncio.gather(
        a.add_partitions("t", [1], have=1),
        b.add_partitions("t", [2], have=1),
        return_exceptions=True,
    )
    assert sum(isinstance(r, TopicInfo) for r in results) == 1, results
    (lost,) = [r for r in results if not isinstance(r, TopicInfo)]
    assert isinstance(lost, PartitionCountChanged) and lost.actual == 2
    t = await b.get_topic("t")
    assert t is not None and len(t.partitions) == 2


async def test_set_topic_configs_replaces_the_whole_set(store: MetaStore) -> None:
    t = await store.create_topic("t", {"a": "1", "b": "2"}, [1, 2])
    changed = await store.set_topic_configs("t", {"b": "3", "c": "4"})
    assert changed == dataclasses.replace(t, configs={"b": "3", "c": "4"})
    assert await store.get_topic("t") == changed
    assert (await store.set_topic_configs("t", {})).configs == {}
    with pytest.raises(MetaStoreError):
        await store.set_topic_configs("nope", {"a": "1"})


# -- leader moves and the metadata version -------------------------------
async def test_move_partitions_sets_leaders_and_bumps_their_epochs(store: MetaStore) -> None:
    t = await store.create_topic("t", {}, [1, 1, 1])
    s0, _, s2 = (p.stream_id for p in t.partitions)
    await store.move_partitions([(s0, 2), (s2, 3)])
    moved = await store.get_topic("t")
    assert moved is not None and _layout(moved) == [(0, 2, 1), (1, 1, 0), (2, 3, 1)]
    await store.move_partitions([(s0, 1)])
    moved = await store.get_topic("t")
    assert moved is not None and _layout(moved) == [(0, 1, 2), (1, 1, 0), (2, 3, 1)]
    # The leader reads the same epoch as its fence.
    assert (await store.load_partition(s0)).leader_epoch == 2
    assert (await store.load_partition(s2)).leader_epoch == 1


async def test_reassign_partitions_sets_preferred_and_moves_only_changed_leaders(
    store: MetaStore,
) -> None:
    t = await store.create_topic("r", {}, [1, 2])
    s0, s1 = (p.stream_id for p in t.partitions)
    assert [p.preferred for p in t.partitions] == [1, 2]  # placed: preferred = leader
    await store.move_partitions([(s0, 3)])  # a failover keeps the preferred node
    after = await store.get_topic("r")
    assert after is not None and [(p.leader_node, p.preferred) for p in after.partitions] == [
        (3, 1),
        (2, 2),
    ]
    version = await store.metadata_version()
    # s0 back to 3 as preferred (its leader already): no new epoch; s1 to node 1: epoch 1.
    await store.reassign_partitions([(s0, 3, 3), (s1, 1, 1)])
    done = await store.get_topic("r")
    assert done is not None and _layout(done) == [(0, 3, 1), (1, 1, 1)]
    assert [p.preferred for p in done.partitions] == [3, 1]
    assert (await store.load_partition(s1)).leader_epoch == 1
    assert await store.metadata_version() != version
    # Preferred set while another node leads (the preferred node is not live).
    await store.reassign_partitions([(s1, 2, 1)])
    last = await store.get_topic("r")
    assert last is not None and (last.partitions[1].leader_node, last.partitions[1].preferred) == (
        1,
        2,
    )
    assert [p.preferred for p in (await store.list_topics())[0].partitions] == [3, 2]


async def test_metadata_version_changes_on_every_topic_partition_or_leader_change(
    stores: Stores,
) -> None:
    store, poller = stores.open(), stores.open()  # nodes poll it from other processes
    seen = [await poller.metadata_version()]

    async def changed() -> None:
        now = await poller.metadata_version()
        assert now != seen[-1]
        seen.append(now)

    t = await store.create_topic("t", {}, [1])
    await changed()
    await store.add_partitions("t", [1])
    await changed()
    await store.set_topic_configs("t", {"a": "1"})
    await changed()
    await store.move_partitions([(t.partitions[0].stream_id, 2)])
    await changed()
    await store.delete_topic("t")
    await changed()
    await store.create_topic("t", {}, [1])
    await changed()


async def test_metadata_version_stays_when_nothing_it_covers_changes(store: MetaStore) -> None:
    """Nodes poll it to skip re-reading the catalog; if produce commits, heartbeats or
    group writes moved it, every poll would be a full re-read."""
    t = await store.create_topic("t", {}, [1])
    sid = t.partitions[0].stream_id
    before = await store.metadata_version()
    await store.list_topics()
    await store.get_topic("t")
    await store.commit_appends([append(sid, 0, producer_id=7)])
    await store.register_node(node(1), 1000, 0)
    await store.expire_node(1)
    await store.acquire_lease("controller", 1, 1000, 0)
    await store.cluster_secret("rpc-token")
    await store.allocate_producer_id()
    await store.save_group(GroupRecord("g", "classic", "{}"))
    await store.commit_offsets("g", [CommittedOffset("t", 0, 1, 0, "", 0)])
    await store.delete_topic("nope")
    assert await store.metadata_version() == before


# -- nodes ----------------------------------------------------------------
async def test_register_node_creates_and_renews_its_row_and_lease(stores: Stores) -> None:
    store = stores.open()
    assert await store.list_nodes() == []
    # The lease is what the call says (now + lease_ms), not what the record carries.
    await store.register_node(dataclasses.replace(node(3), lease_expires_ms=1), 1000, 5000)
    await store.register_node(node(1), 500, 5000)
    assert await store.list_nodes() == [
        dataclasses.replace(node(1), lease_expires_ms=5500),
        dataclasses.replace(node(3), lease_expires_ms=6000),
    ], "ordered by node id"
    # A renewal moves the lease and takes the node's new zone and addresses.
    moved = dataclasses.replace(node(1, "zone-b"), kafka_port=19092, rpc_host="elsewhere")
    await store.register_node(moved, 500, 7000)
    expected = [
        dataclasses.replace(moved, lease_expires_ms=7500),
        dataclasses.replace(node(3), lease_expires_ms=6000),
    ]
    assert await store.list_nodes() == expected
    assert await stores.open().list_nodes() == expected, "every node reads the same rows"


async def test_the_peers_a_node_reports_unreached_and_its_cut_off_mark_are_kept(
    stores: Stores,
) -> None:
    """The node writes `unreached` with each renewal; the controller's `cut_off_ms` stays
    through renewals (and a new incarnation's claim) until the controller clears it."""
    store = stores.open()
    await store.register_node(dataclasses.replace(node(1), unreached=(3, 5)), 500, 5000)
    await store.register_node(node(2), 500, 5000)
    await store.set_cut_off(1, 5100)
    one, two = await stores.open().list_nodes()
    assert (one.unreached, one.cut_off_ms) == ((3, 5), 5100)
    assert (two.unreached, two.cut_off_ms) == ((), 0)
    await store.register_node(node(1), 500, 5200)  # it reaches everyone again
    one, _ = await store.list_nodes()
    assert (one.unreached, one.cut_off_ms) == ((), 5100), "a renewal leaves the mark"
    await store.set_cut_off(1, 0)
    one, _ = await store.list_nodes()
    assert one.cut_off_ms == 0 and one.leads(5300)


async def test_a_nodes_listener_endpoints_are_kept_with_its_row(stores: Stores) -> None:
    store = stores.open()
    endpoints = (("PLAINTEXT", "10.0.0.1", 9092), ("SASL_SSL", "kafka-1.example.com", 9093))
    await store.register_node(dataclasses.replace(node(1), endpoints=endpoints), 500, 5000)
    await store.register_node(node(2), 500, 5000)  # a node of a release before listeners
    one, two = await stores.open().list_nodes()
    assert one.endpoints == endpoints
    assert one.endpoint("SASL_SSL") == ("kafka-1.example.com", 9093)
    assert one.endpoint("SSL") is None, "a listener the node has not"
    assert two.endpoints == () and two.endpoint("PLAINTEXT") == ("kafka-2", 9092)
    assert two.endpoint("SASL_SSL") is None
    # A renewal takes the node's listeners as they are now.
    await store.register_node(dataclasses.replace(node(1), endpoints=endpoints[:1]), 500, 6000)
    assert (await store.list_nodes())[0].endpoints == endpoints[:1]


async def test_expire_node_ends_its_lease_and_keeps_it_listed(store: MetaStore) -> None:
    await store.register_node(node(1), 1000, 5000)
    await store.register_node(node(2), 1000, 5000)
    await store.expire_node(1)
    await store.expire_node(99)  # never registered: nothing to do
    one, two = await store.list_nodes()
    assert one == dataclasses.replace(node(1), lease_expires_ms=0)
    assert not one.live(0) and two.live(5999) and not two.live(6000)
    assert two == dataclasses.replace(node(2), lease_expires_ms=6000)
    await store.register_node(node(1), 1000, 8000)
    assert (await store.list_nodes())[0].live(8999), "a node comes back by registering"


# -- leases ---------------------------------------------------------------
async def test_lease_taken_renewed_refused_and_taken_over_after_expiry(store: MetaStore) -> None:
    assert await store.acquire_lease("controller", 1, ttl_ms=1000, now_ms=0)
    assert await store.acquire_lease("controller", 1, ttl_ms=1000, now_ms=500), "renewed"
    assert not await store.acquire_lease("controller", 2, ttl_ms=1000, now_ms=1000)
    assert not await store.acquire_lease("controller", 2, ttl_ms=1000, now_ms=1499)
    assert await store.acquire_lease("controller", 2, ttl_ms=1000, now_ms=1500), "expired"
    assert not await store.acquire_lease("controller", 1, ttl_ms=1000, now_ms=1600)
    assert await store.acquire_lease("other", 1, ttl_ms=1000, now_ms=1600), "another name"


async def test_a_lease_is_free_once_its_holders_node_lease_ended(store: MetaStore) -> None:
    """A controller whose process died is not waited out: once its node's lease ends
    (expired, or ended by a node that found it dead), its leases are free."""
    await store.register_node(node(1), 1000, 0)
    await store.register_node(node(2), 1000, 0)
    assert await store.acquire_lease("controller", 1, ttl_ms=5000, now_ms=0)
    assert not await store.acquire_lease("controller", 2, ttl_ms=5000, now_ms=999)
    assert await store.acquire_lease("controller", 2, ttl_ms=5000, now_ms=1000), (
        "node 1's lease ran out before the controller lease did"
    )
    await store.register_node(node(1), 1000, 1000)
    await store.register_node(node(2), 1000, 1000)
    assert not await store.acquire_lease("controller", 1, ttl_ms=5000, now_ms=1500)
    await store.expire_node(2)
    assert await store.acquire_lease("controller", 1, ttl_ms=5000, now_ms=1500), "node 2 was ended"
    assert not await store.acquire_lease("controller", 2, ttl_ms=5000, now_ms=1600)


async def test_a_lease_has_one_holder_across_connections(stores: Stores) -> None:
    a, b = stores.open(), stores.open()
    assert await a.acquire_lease("controller", 1, ttl_ms=1000, now_ms=0)
    assert not await b.acquire_lease("controller", 2, ttl_ms=1000, now_ms=999)
    assert await b.acquire_lease("controller", 2, ttl_ms=1000, now_ms=1000), "expired"
    assert not await a.acquire_lease("controller", 1, ttl_ms=1000, now_ms=1001), "stolen"
    # Two nodes asking for a free lease at the same moment: exactly one gets it.
    for n in range(5):
        got = await asyncio.gather(
            a.acquire_lease(f"race-{n}", 1, ttl_ms=1000, now_ms=0),
            b.acquire_lease(f"race-{n}", 2, ttl_ms=1000, now_ms=0),
        )
        assert sorted(got) == [False, True], got


# -- cluster secrets -----------------------------------------------------
async def test_cluster_secret_is_made_once_and_read_alike(stores: Stores) -> None:
    a = stores.open()
    token = await a.cluster_secret("rpc-token")
    assert len(token) >= 32, "at least 128 random bits, as hex"
    assert await a.cluster_secret("rpc-token") == token
    assert await a.cluster_secret("other") != token, "each name its own secret"
    await stores.close(a)
    assert await stores.open().cluster_secret("rpc-token") == token, "kept across restarts"


async def test_concurrent_first_asks_for_a_secret_agree(stores: Stores) -> None:
    """Nodes starting together each ask first; all must end up with the one kept."""
    nodes = [stores.open() for _ in range(3)]
    for name in ("rpc-token", "a", "b"):
        got = await asyncio.gather(*(n.cluster_secret(name) for n in nodes))
        assert len(set(got)) == 1, got


# -- node identity --------------------------------------------------------
async def test_a_live_node_row_is_renewed_only_by_its_incarnation(stores: Stores) -> None:
    """Two processes as one node: the second is refused while the first's lease lives,
    and once the second holds it, the first (a zombie) can neither renew nor expire it."""
    first, second = stores.open(), stores.open()
    one = dataclasses.replace(node(1), incarnation=11)
    two = dataclasses.replace(node(1, "zone-b"), incarnation=22)
    assert await first.register_node(one, 1000, 0)
    assert not await second.register_node(two, 1000, 500), "node 1 is alive"
    assert await second.list_nodes() == [dataclasses.replace(one, lease_expires_ms=1000)]
    assert await first.register_node(one, 1000, 500), "renewed by its own incarnation"
    assert await second.register_node(two, 1000, 1500), "taken once the lease ran out"
    assert not await first.register_node(one, 1000, 1600), "the zombie's renewal"
    await first.expire_node(1, incarnation=11)  # the zombie leaving
    (row,) = await second.list_nodes()
    assert row == dataclasses.replace(two, lease_expires_ms=2500)
    await second.expire_node(1, incarnation=22)
    assert (await first.list_nodes())[0].lease_expires_ms == 0
