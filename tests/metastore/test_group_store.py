"""GroupStore's contract: groups' state and committed offsets; every backend runs it."""

from __future__ import annotations

from tests.metastore.backends import Stores
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import CommittedOffset, GroupRecord


def _offset(topic: str, partition: int, offset: int = 5) -> CommittedOffset:
    return CommittedOffset(topic, partition, offset, 3, f"meta {topic}-{partition}", 1000)


async def test_groups_saved_loaded_and_replaced(stores: Stores) -> None:
    a, b = stores.open(), stores.open()
    assert await a.load_group("g") is None
    classic = GroupRecord("g", "classic", '{"generation": 1}')
    await a.save_group(classic)
    assert await a.load_group("g") == classic
    # A save replaces the whole record, type included (a group converted to KIP-848).
    consumer = GroupRecord("g", "consumer", '{"epoch": 7}')
    await a.save_group(consumer)
    assert await a.load_group("g") == consumer
    assert await b.load_group("g") == consumer, "a group moved to another coordinator"
    assert await a.load_group("h") is None


async def test_list_groups_has_every_group_with_state_or_offsets(store: MetaStore) -> None:
    assert await store.list_groups() == []
    state = GroupRecord("b", "consumer", "{}")
    await store.save_group(state)
    await store.save_group(GroupRecord("c", "classic", '{"x": 1}'))
    await store.commit_offsets("b", [_offset("t", 0)])
    # Offsets committed with no group state (an admin or a simple consumer): classic.
    await store.commit_offsets("a", [_offset("t", 0), _offset("t", 1)])
    assert await store.list_groups() == [
        GroupRecord("a", "classic", ""),
        state,
        GroupRecord("c", "classic", '{"x": 1}'),
    ], "each group once, ordered by id"


async def test_delete_group_drops_its_state_and_every_offset(store: MetaStore) -> None:
    await store.save_group(GroupRecord("g", "classic", "{}"))
    await store.commit_offsets("g", [_offset("t", 0), _offset("u", 1)])
    await store.commit_offsets("h", [_offset("t", 0)])
    await store.commit_offsets("offsets-only", [_offset("t", 0)])
    await store.delete_group("g")
    await store.delete_group("offsets-only")
    await store.delete_group("nope")  # nothing to drop
    assert await store.load_group("g") is None
    assert await store.fetch_offsets("g") == []
    assert await store.fetch_offsets("offsets-only") == []
    assert await store.fetch_offsets("h") == [_offset("t", 0)], "other groups keep theirs"
    assert await store.list_groups() == [GroupRecord("h", "classic", "")]


async def test_offsets_round_trip_ordered_and_overwritten(store: MetaStore) -> None:
    assert await store.fetch_offsets("g") == []
    # 64-bit offsets and times; -1 is Kafka's "no leader epoch known".
    big = CommittedOffset("t", 1, 1 << 40, -1, "", 1_700_000_000_000)
    await store.commit_offsets("g", [big, _offset("t", 0), _offset("s", 9)])
    assert await store.fetch_offsets("g") == [_offset("s", 9), _offset("t", 0), big]
    # A commit overwrites the partitions it names and keeps the others.
    moved = CommittedOffset("t", 0, 42, 4, "later", 2000)
    await store.commit_offsets("g", [moved])
    assert await store.fetch_offsets("g") == [_offset("s", 9), moved, big]
    await store.commit_offsets("h", [_offset("t", 0, 1)])
    assert await store.fetch_offsets("h") == [_offset("t", 0, 1)], "per group"
    assert (await store.fetch_offsets("g"))[1] == moved


async def test_delete_offsets_drops_only_the_named_partitions(store: MetaStore) -> None:
    await store.commit_offsets("g", [_offset("t", 0), _offset("t", 1), _offset("u", 1)])
    await store.commit_offsets("h", [_offset("t", 1)])
    await store.delete_offsets("g", [("t", 1), ("u", 0), ("nope", 3)])
    assert await store.fetch_offsets("g") == [_offset("t", 0), _offset("u", 1)]
    assert await store.fetch_offsets("h") == [_offset("t", 1)], "only the group named"


async def test_delete_topic_drops_the_offsets_committed_on_it(store: MetaStore) -> None:
    """As Kafka does: a topic created again under the name starts with no stale positions."""
    await store.create_topic("t", {}, [1, 1])
    await store.create_topic("u", {}, [1])
    state = GroupRecord("g", "classic", "{}")
    await store.save_group(state)
    await store.commit_offsets("g", [_offset("t", 0), _offset("t", 1), _offset("u", 0)])
    await store.commit_offsets("h", [_offset("t", 0)])
    await store.delete_topic("t")
    assert await store.fetch_offsets("g") == [_offset("u", 0)]
    assert await store.fetch_offsets("h") == []
    assert await store.load_group("g") == state, "the group itself stays"
    await store.create_topic("t", {}, [1])
    assert await store.fetch_offsets("g") == [_offset("u", 0)]
