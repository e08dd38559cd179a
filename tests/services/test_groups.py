"""Group calls routed to the node that coordinates the group (services/groups.py): served
by the owner wherever the client connected, moved to the next owner when one dies, and
NOT_COORDINATOR when none can serve. Two nodes' group services over one SQLite metadata
store (a temp file), linked in process instead of over gRPC; the clock injected."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.schema.errors import ErrorCode

from tests.storage.fakes import spin
from zonegate.coordinator.classic import GroupConfig
from zonegate.coordinator.service import GroupCoordinator, OffsetToCommit
from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.runtime.clock import ManualClock
from zonegate.services.groups import RoutedGroups

pytestmark = pytest.mark.unit
T = TypeVar("T")
TID = uuid.uuid4()
TOPIC = TopicInfo(TID, "t", tuple(PartitionInfo(TID, "t", p, p, 1, 0) for p in range(2)))
GROUP = "readers"
OWNER_WAIT_S = 8.0


class Owners:
    """Which node coordinates every group: one for all, moved by the test."""

    def __init__(self, node: int) -> None:
        self.node = node

    def group_owner(self, group_id: str) -> int:
        return self.node


class Link:
    """The way to another node's group service; a test cuts it, or makes it fail after
    the call arrived (reached, then too slow to answer)."""

    def __init__(self, far: RoutedGroups) -> None:
        self.far = far
        self.down = False
        self.slow = False
        self.calls = 0

    async def group_call(self, payload: bytes, *, timeout_s: float) -> bytes:
        if self.down:
            raise LeaderUnavailable("coordinator 127.0.0.1:1: UNAVAILABLE", unreachable=True)
        self.calls += 1
        answer = await self.far.serve(payload)
        if self.slow:
            raise LeaderUnavailable("coordinator 127.0.0.1:1: DEADLINE_EXCEEDED")
        return answer


class Cluster:
    def __init__(self, meta: SqliteMetaStore, clock: ManualClock) -> None:
        self.owners = Owners(2)
        self.coordinators = [
            GroupCoordinator(meta, GroupConfig(initial_rebalance_delay_ms=0), {"t": TOPIC}.get)
            for _ in (1, 2)
        ]
        self.nodes = {
            n: RoutedGroups(
                self.coordinators[n - 1],
                n,
                self.owners,
                self._peer,
                clock,
                owner_wait_s=OWNER_WAIT_S,
            )
            for n in (1, 2)
        }
        self.links: dict[int, Link] = {n: Link(g) for n, g in self.nodes.items()}

    def _peer(self, node_id: int) -> Link | None:
        return self.links.get(node_id)


def run(tmp_path: Path, body: Callable[[Cluster, ManualClock], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        clock = ManualClock()
        try:
            # Only a guard against a hang: nothing here waits on real time.
            await asyncio.wait_for(body(Cluster(meta, clock), clock), 10)
        finally:
            await meta.close()

    asyncio.run(main())


def _offset(partition: int, offset: int) -> OffsetToCommit:
    return OffsetToCommit("t", partition, offset, 0, None)


async def _committed(groups: RoutedGroups) -> list[tuple[int, int]]:
    error, offsets = await groups.fetch_offsets(GROUP, None)
    assert error == ErrorCode.none
    return sorted((o.partition, o.offset) for o in offsets)


def test_a_call_made_on_any_node_is_served_by_the_groups_owner(tmp_path: Path) -> None:
    async def body(c: Cluster, clock: ManualClock) -> None:
        errors = await c.nodes[1].commit_offsets(GROUP, -1, "", None, [_offset(0, 5)])
        assert errors == [ErrorCode.none]
        assert c.links[2].calls == 1, "node 1 passed the call to the owner"
        assert GROUP in c.coordinators[1].groups and GROUP not in c.coordinators[0].groups
        # Asked of the owner itself: served there, nothing passed on.
        assert await _committed(c.nodes[2]) == [(0, 5)]
        assert c.links[1].calls == 0
        assert await _committed(c.nodes[1]) == [(0, 5)]

    run(tmp_path, body)


def test_a_dead_owners_groups_move_to_the_next_owner(tmp_path: Path) -> None:
    async def body(c: Cluster, clock: ManualClock) -> None:
        await c.nodes[1].commit_offsets(GROUP, -1, "", None, [_offset(1, 9)])
        c.links[2].down = True
        call = asyncio.ensure_future(_committed(c.nodes[1]))
        await spin()
        await clock.advance(1.0)
        assert not call.done(), "waits for the membership to name another owner"
        c.owners.node = 1  # node 2's lease ran out
        await clock.advance(1.0)  # the next look at the owners (the store is read here)
        assert await call == [(1, 9)]  # served here, from the committed offsets

    run(tmp_path, body)


def test_no_owner_in_reach_answers_not_coordinator_after_the_wait(tmp_path: Path) -> None:
    async def body(c: Cluster, clock: ManualClock) -> None:
        c.links[2].down = True
        call = asyncio.ensure_future(c.nodes[1].delete_group(GROUP))
        await spin()
        await clock.advance(OWNER_WAIT_S - 0.5)
        assert not call.done()
        await clock.advance(1.0)
        assert await call == ErrorCode.not_coordinator

    run(tmp_path, body)


def test_an_owner_reached_but_failing_answers_not_coordinator_at_once(tmp_path: Path) -> None:
    async def body(c: Cluster, clock: ManualClock) -> None:
        c.links[2].slow = True
        # Not retried: the call reached the owner and may have been served.
        errors = await c.nodes[1].commit_offsets(GROUP, -1, "", None, [_offset(0, 1)])
        assert errors == [ErrorCode.not_coordinator]
        assert c.links[2].calls == 1

    run(tmp_path, body)


def test_a_node_asked_about_a_group_it_does_not_own_answers_not_coordinator(
    tmp_path: Path,
) -> None:
    async def body(c: Cluster, clock: ManualClock) -> None:
        # Node 1 thinks node 2 owns the group; node 2 has just seen node 1 take it over.
        c.links[2].far = RoutedGroups(
            c.coordinators[1], 2, Owners(1), lambda n: None, clock, owner_wait_s=0
        )
        assert await c.nodes[1].delete_group(GROUP) == ErrorCode.not_coordinator
        assert c.links[2].calls == 1

    run(tmp_path, body)


def test_a_topic_the_cache_has_not_seen_yet_is_looked_up_before_a_commit(
    tmp_path: Path,
) -> None:
    """A group taken over from a dead node may be asked to commit offsets of a topic made
    through another node since this one's catalog last reloaded: it reloads, then
    commits, rather than answer UNKNOWN_TOPIC_OR_PARTITION for a topic that exists."""

    async def body(meta: SqliteMetaStore) -> None:
        cache: dict[str, TopicInfo] = {}
        refreshes = 0

        async def refresh() -> None:
            nonlocal refreshes
            refreshes += 1
            cache["t"] = TOPIC  # what the store holds

        async def lookup(name: str) -> TopicInfo | None:  # as the catalog's `lookup`
            if name not in cache:
                await refresh()
            return cache.get(name)

        coord = GroupCoordinator(
            meta, GroupConfig(initial_rebalance_delay_ms=0), cache.get, lookup_topic=lookup
        )
        assert await coord.commit_offsets(GROUP, -1, "", None, [_offset(1, 4)]) == [ErrorCode.none]
        assert refreshes == 1
        # A topic the store does not hold either stays unknown; known ones cost no reload.
        unknown = OffsetToCommit("gone", 0, 1, 0, None)
        assert await coord.commit_offsets(GROUP, -1, "", None, [unknown, _offset(0, 2)]) == [
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.none,
        ]
        assert refreshes == 2
        error, offsets = await coord.fetch_offsets(GROUP, None)
        assert sorted((o.partition, o.offset) for o in offsets) == [(0, 2), (1, 4)]

    async def main() -> None:
        meta = SqliteMetaStore(str(tmp_path / "meta.db"))
        try:
            await body(meta)
        finally:
            await meta.close()

    asyncio.run(main())
