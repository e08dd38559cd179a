"""KIP-848 entry points on a real GroupCoordinator over a SQLite metadata store (a temp file):
group types, persistence across a coordinator restart, offsets checks."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import ClassicGroup, GroupConfig, JoinRequest
from zonegate.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupSettings,
    HeartbeatRequest,
)
from zonegate.coordinator.consumer_service import consumer_describe, consumer_heartbeat, heartbeat
from zonegate.coordinator.service import GroupCoordinator, OffsetToCommit
from zonegate.metastore.api import open_metastore
from zonegate.metastore.models import PartitionInfo, TopicInfo

TID = uuid.uuid4()
TOPIC = TopicInfo(TID, "t", tuple(PartitionInfo(TID, "t", p, p, 1, 0) for p in range(4)))
SETTINGS = ConsumerGroupSettings(heartbeat_interval_ms=700, session_timeout_ms=9000)


Factory = Callable[[], Awaitable[GroupCoordinator]]


def run(tmp: Path, body: Callable[[Factory], Awaitable[None]]) -> None:
    async def main() -> None:
        started: list[GroupCoordinator] = []

        async def coordinator() -> GroupCoordinator:
            meta = open_metastore(f"sqlite:///{tmp / 'meta.db'}")
            coord = GroupCoordinator(
                meta, GroupConfig(initial_rebalance_delay_ms=0), {"t": TOPIC}.get
            )
            await coord.start()
            started.append(coord)
            return coord

        try:
            await body(coordinator)
        finally:
            for coord in started:
                await coord.stop()
                await coord.meta.close()

    asyncio.run(main())


def join(member_id: str, **kw: object) -> HeartbeatRequest:
    fields: dict[str, object] = {
        "member_id": member_id,
        "member_epoch": 0,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": ("t",),
        "owned": (),
    }
    fields.update(kw)
    return HeartbeatRequest(**fields)  # type: ignore[arg-type]


def names() -> list[str]:
    return ["t"]


def test_join_persists_and_a_new_coordinator_carries_on(tmp_path: Path) -> None:
    async def body(coordinator: Factory) -> None:
        first = await coordinator()
        res = await consumer_heartbeat(first, "g", join("m1"), SETTINGS, names)
        assert res.error is ErrorCode.none and res.member_epoch == 1
        assert res.heartbeat_interval_ms == 700
        assert res.assignment == {TID: frozenset(range(4))}
        errors = await first.commit_offsets(
            "g", 1, "m1", None, [OffsetToCommit("t", 0, 42, -1, None)]
        )
        assert errors == [ErrorCode.none]
        stale = await first.commit_offsets(
            "g", 7, "m1", None, [OffsetToCommit("t", 0, 43, -1, None)]
        )
        assert stale == [ErrorCode.stale_member_epoch]
        # A restart: another coordinator on the same store loads the saved group.
        second = await coordinator()
        group = await second.get("g")
        assert isinstance(group, ConsumerGroup)
        assert group.settings == SETTINGS and group.state_name == "Stable"
        owned = ((TID, (0, 1, 2, 3)),)
        res = await consumer_heartbeat(
            second, "g", HeartbeatRequest("m1", 1, owned=owned), SETTINGS, names
        )
        assert res.error is ErrorCode.none and res.member_epoch == 1
        error, offsets = await second.fetch_offsets("g", [("t", 0)], "m1", 1)
        assert error is ErrorCode.none and offsets[0].offset == 42
        error, _ = await second.fetch_offsets("g", [("t", 0)], "m1", 0)
        assert error is ErrorCode.stale_member_epoch
        error, _ = await second.fetch_offsets("g", [("t", 0)], "nobody", 1)
        assert error is ErrorCode.unknown_member_id
        listed = {s.group_id: s for s in await second.list_groups()}
        assert listed["g"].group_type == "consumer" and listed["g"].state == "Stable"

    run(tmp_path, body)


def test_unknown_group_and_classic_groups(tmp_path: Path) -> None:
    async def body(coordinator: Factory) -> None:
        coord = await coordinator()
        res = await consumer_heartbeat(
            coord, "nope", HeartbeatRequest("m", 3, owned=()), SETTINGS, names
        )
        assert res.error is ErrorCode.group_id_not_found
        res = await consumer_heartbeat(coord, "", join("m"), SETTINGS, names)
        assert res.error is ErrorCode.invalid_request
        # A classic group with a member: KIP-848 members are refused.
        joined = await coord.join(
            "classic",
            JoinRequest("", None, "c", "/h", 10000, 10000, "consumer", [("range", b"")], False),
        )
        assert joined.error is ErrorCode.none
        res = await consumer_heartbeat(coord, "classic", join("m"), SETTINGS, names)
        assert res.error is ErrorCode.group_id_not_found
        (described,) = await consumer_describe(coord, ["classic"])
        assert described.error is ErrorCode.group_id_not_found
        # An empty classic group (offsets only) is taken over, its offsets kept.
        await coord.commit_offsets("simple", -1, "", None, [OffsetToCommit("t", 1, 5, -1, None)])
        assert isinstance(await coord.get("simple"), ClassicGroup)
        res = await consumer_heartbeat(coord, "simple", join("m"), SETTINGS, names)
        assert res.error is ErrorCode.none
        assert isinstance(await coord.get("simple"), ConsumerGroup)
        error, offsets = await coord.fetch_offsets("simple", [("t", 1)])
        assert offsets[0].offset == 5
        (described,) = await consumer_describe(coord, ["simple"])
        assert described.error is ErrorCode.none and described.group is not None
        assert list(described.group.members) == ["m"]

    run(tmp_path, body)


def test_a_groups_own_configs_set_its_session_and_heartbeat(tmp_path: Path) -> None:
    """KIP-848's group configs (IncrementalAlterConfigs on the group): the coordinator
    gives that group, and only it, its own heartbeat interval and session timeout."""

    async def main() -> None:
        meta = open_metastore(f"sqlite:///{tmp_path / 'meta.db'}")
        own = {"tuned": {"consumer.heartbeat.interval.ms": "6000"}}
        coord = GroupCoordinator(
            meta,
            GroupConfig(initial_rebalance_delay_ms=0),
            {"t": TOPIC}.get,
            consumer_settings=SETTINGS,
            topic_names=names,
            group_configs=lambda g: own.get(g, {}),
        )
        await coord.start()
        try:
            res = await heartbeat(coord, "tuned", join("m1"))
            assert res.error is ErrorCode.none and res.heartbeat_interval_ms == 6000
            res = await heartbeat(coord, "plain", join("m2"))
            assert res.heartbeat_interval_ms == 700
            # A change applies from the group's next heartbeat.
            own["tuned"] = {"consumer.session.timeout.ms": "50000"}
            owned = ((TID, (0, 1, 2, 3)),)
            res = await heartbeat(coord, "tuned", HeartbeatRequest("m1", 1, owned=owned))
            assert res.heartbeat_interval_ms == 700
            group = await coord.get("tuned")
            assert isinstance(group, ConsumerGroup)
            assert group.settings.session_timeout_ms == 50000
        finally:
            await coord.stop()
            await meta.close()

    asyncio.run(main())


def test_a_transactional_commit_with_a_stale_member_epoch_is_illegal_generation(
    tmp_path: Path,
) -> None:
    """Kafka 4's TxnOffsetCommit on a consumer group: the member's epoch is checked as
    OffsetCommit's, and a stale one answers ILLEGAL_GENERATION (TxnOffsetCommit has no
    STALE_MEMBER_EPOCH)."""

    async def body(coordinator: Factory) -> None:
        coord = await coordinator()
        res = await consumer_heartbeat(coord, "g", join("m1"), SETTINGS, names)
        assert res.error is ErrorCode.none and res.member_epoch == 1
        offsets = [OffsetToCommit("t", 0, 42, -1, None)]
        assert await coord.txn_commit_offsets("g", 9, 0, 1, "m1", None, offsets) == [ErrorCode.none]
        stale = await coord.txn_commit_offsets("g", 9, 0, 7, "m1", None, offsets)
        assert stale == [ErrorCode.illegal_generation]
        unknown = await coord.txn_commit_offsets("g", 9, 0, 1, "m2", None, offsets)
        assert unknown == [ErrorCode.unknown_member_id]
        assert await coord.meta.pending_offsets("g") == [("t", 0)]

    run(tmp_path, body)
