"""The group coordinator: the groups this node coordinates, their timers and persistence.

Groups live in memory while this node coordinates them and in the metadata
store always: every change worth keeping (a new generation, an assignment, a
member gone) is saved before the answer that reveals it, and every committed
offset is saved before the commit is acknowledged. A coordinator that starts,
restarts or takes a group over loads it from the store on first use.

Group types: "classic" (JoinGroup/SyncGroup, `classic.py`) and "consumer"
(KIP-848 ConsumerGroupHeartbeat, `consumer_group.py`). A group id has one type
for its life; asking for the other type answers as Kafka does
(INCONSISTENT_GROUP_PROTOCOL for JoinGroup, GROUP_ID_NOT_FOUND for
ConsumerGroupHeartbeat on a non-empty classic group).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import (
    ClassicGroup,
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from zonegate.coordinator.consumer_group import ConsumerGroup, ConsumerGroupSettings
from zonegate.coordinator.describe import ClassicGroupDescription, describe_classic
from zonegate.metastore.api import GroupStore, PendingOffsetStore
from zonegate.metastore.models import CommittedOffset, GroupRecord, TopicInfo
from zonegate.runtime.clock import SYSTEM_CLOCK, Clock, wait_event
from zonegate.runtime.principal import who

log = logging.getLogger(__name__)

T = TypeVar("T")

OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default


def now_ms(clock: Clock = SYSTEM_CLOCK) -> float:
    """Session and rebalance deadlines: the monotonic clock, in milliseconds."""
    return clock.monotonic() * 1000.0


class Group(Protocol):
    """What the coordinator needs of a group of either type."""

    group_id: str
    group_type: str
    version: int

    @property
    def state_name(self) -> str: ...

    def is_empty(self) -> bool: ...

    def subscribed_topics(self) -> set[str] | None: ...

    def tick(self, now: float) -> None: ...

    def next_deadline(self) -> float | None: ...

    def shutdown(self) -> None: ...

    def snapshot(self) -> str: ...


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp: int = -1  # OffsetCommit v1 only; -1: the time of the commit


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    group_type: str
    protocol_type: str
    state: str


TopicLookup = Callable[[str], TopicInfo | None]
GroupLoader = Callable[[str, GroupConfig, str, float], Group]


class OffsetStore(GroupStore, PendingOffsetStore, Protocol):
    """The groups' rows, and the offsets pending in transactions (TxnOffsetCommit)."""


class GroupCoordinator:
    def __init__(
        self,
        meta: OffsetStore,
        config: GroupConfig,
        topics: TopicLookup,
        clock: Clock = SYSTEM_CLOCK,
        *,
        consumer_settings: ConsumerGroupSettings | None = None,
        topic_names: Callable[[], Iterable[str]] = tuple,
        topic_by_id: Callable[[uuid.UUID], TopicInfo | None] = lambda _: None,
        group_configs: Callable[[str], Mapping[str, str]] = lambda _: {},
        lookup_topic: Callable[[str], Awaitable[TopicInfo | None]] | None = None,
    ) -> None:
        self.meta = meta
        self.pending: PendingOffsetStore = meta
        self.clock = clock
        self.config = config
        self.topics = topics
        # KIP-848 groups: the broker's group.consumer.* settings, and the cluster's topics
        # by name (regex subscriptions) and by id (describing assignments).
        self.consumer_settings = consumer_settings or ConsumerGroupSettings()
        self.group_configs = group_configs  # a group's own configs (KIP-848), by group id
        # The topic also when `topics` has not seen it yet (the catalog's `lookup`): a
        # topic another node made a moment ago is not unknown to an offset commit (a
        # group taken over from a dead node). Without one, `topics` alone answers.
        self.lookup_topic = lookup_topic
        self.topic_names = topic_names
        self.topic_by_id = topic_by_id
        self.groups: dict[str, Group] = {}
        self._saved: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._loaders: dict[str, GroupLoader] = {"classic": ClassicGroup.restore}
        self._loaders["consumer"] = ConsumerGroup.restore
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ----------------------------------------------------------
    async def start(self) -> None:
        """Runs the groups' timers in a task of its own (tests; a node's supervisor runs
        `run_timers` instead)."""
        self._task = asyncio.get_running_loop().create_task(self.run_timers())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stops every group's timers and saves them (the timers' task is stopped)."""
        for group in self.groups.values():
            group.shutdown()
        await self._save_all()

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drops the groups this node no longer coordinates (another node loads them)."""
        for gid in [g for g in self.groups if not keep(g)]:
            self.groups.pop(gid).shutdown()
            self._saved.pop(gid, None)

    # -- loading and saving ---------------------------------------------------
    def _lock(self, group_id: str) -> asyncio.Lock:
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    async def get(self, group_id: str) -> Group | None:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        async with self._lock(group_id):
            group = self.groups.get(group_id)
            if group is None:
                record = await self.meta.load_group(group_id)
                if record is None:
                    return None
                loader = self._loaders.get(record.group_type)
                if loader is None:
                    raise RuntimeError(f"group {group_id!r} has unknown type {record.group_type!r}")
                group = loader(group_id, self.config, record.state, now_ms(self.clock))
                self.groups[group_id] = group
                self._saved[group_id] = group.version
        return group

    def adopt(self, group: Group) -> None:
        """A new group (not yet in the store; the next `save` writes it)."""
        self.groups[group.group_id] = group
        self._saved[group.group_id] = -1
        self._wake.set()

    async def save(self, group: Group) -> None:
        """Writes the group's state if it changed since the last write."""
        self._wake.set()
        async with self._lock(group.group_id):
            if self.groups.get(group.group_id) is not group:
                return  # deleted or moved meanwhile
            version = group.version
            if self._saved.get(group.group_id) == version:
                return
            record = GroupRecord(group.group_id, group.group_type, group.snapshot())
            await self.meta.save_group(record)
            self._saved[group.group_id] = version

    async def _save_all(self) -> None:
        for group in list(self.groups.values()):
            try:
                await self.save(group)
            except Exception:
                log.exception("saving group %s failed", group.group_id)

    async def run_timers(self) -> None:
        """Session and rebalance deadlines of every group, for as long as the node runs."""
        while True:
            deadlines = [d for g in self.groups.values() if (d := g.next_deadline()) is not None]
            wait = (min(deadlines) - now_ms(self.clock)) / 1000.0 if deadlines else 1.0
            self._wake.clear()
            # At least a few ms: a deadline already past must not spin the loop.
            await wait_event(self.clock, self._wake, min(max(wait, 0) + 0.005, 1.0))
            now = now_ms(self.clock)
            for group in list(self.groups.values()):
                group.tick(now)
            await self._save_all()

    async def _answer(self, group: Group, result: T | asyncio.Future[T]) -> T:
        """Saves what the call changed, then waits (if it must) for the answer."""
        await self.save(group)
        if isinstance(result, asyncio.Future):
            answer: T = await asyncio.shield(result)
            await self.save(group)  # the transition that answered (e.g. a new assignment)
            return answer
        return result

    # -- classic protocol ---------------------------------------------------
    async def classic_group(self, group_id: str, create: bool) -> ClassicGroup | ErrorCode:
        group = await self.get(group_id)
        if group is None:
            if not create:
                return ErrorCode.unknown_member_id
            group = ClassicGroup(group_id, self.config)
            self.adopt(group)
        if not isinstance(group, ClassicGroup):
            return ErrorCode.inconsistent_group_protocol
        return group

    async def join(self, group_id: str, req: JoinRequest) -> JoinResult:
        group = await self.classic_group(group_id, create=True)
        if isinstance(group, ErrorCode):
            return JoinResult(group, req.member_id)
        before = set(group.members)
        answer = group.join(req, now_ms(self.clock))
        # Changes name the client's principal, whichever node it reached (runtime/principal.py).
        for member_id in group.members.keys() - before:
            log.info("group %r: member %s joined (by %s)", group_id, member_id, who())
        return await self._answer(group, answer)

    async def sync(self, group_id: str, **kwargs: Any) -> SyncResult:
        group = await self.classic_group(group_id, create=False)
        if isinstance(group, ErrorCode):
            return SyncResult(group)
        return await self._answer(group, group.sync(now=now_ms(self.clock), **kwargs))

    async def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        group = await self.classic_group(group_id, create=False)
        if isinstance(group, ErrorCode):
            return group
        error = group.heartbeat(
            member_id=member_id,
            instance_id=instance_id,
            generation=generation,
            now=now_ms(self.clock),
        )
        return await self._answer(group, error)

    async def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        group = await self.classic_group(group_id, create=False)
        if isinstance(group, ErrorCode):
            return group, [group] * len(members)
        now = now_ms(self.clock)
        errors = [group.leave(member_id, instance_id, now) for member_id, instance_id in members]
        for (member_id, instance_id), error in zip(members, errors, strict=True):
            if error is ErrorCode.none:
                log.info(
                    "group %r: member %s left (by %s)",
                    group_id,
                    member_id or f"of instance {instance_id}",
                    who(),
                )
        await self.save(group)
        return ErrorCode.none, errors

    # -- offsets --------------------------------------------------------------
    async def _partition_error(self, topic: str, partition: int) -> ErrorCode:
        info = self.topics(topic)
        if info is None and self.lookup_topic is not None:
            info = await self.lookup_topic(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return ErrorCode.unknown_topic_or_partition
        return ErrorCode.none

    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: Sequence[OffsetToCommit],
    ) -> list[ErrorCode]:
        """One error code per offset, in order; the good ones are durable when this returns."""
        group = await self.get(group_id)
        simple = generation < 0 and not member_id and instance_id is None
        if group is None:
            if not simple:
                return [ErrorCode.illegal_generation] * len(offsets)
            group = ClassicGroup(group_id, self.config)
            self.adopt(group)
            await self.save(group)
        check = getattr(group, "validate_commit", None)
        error = check(member_id, instance_id, generation) if check is not None else ErrorCode.none
        if error is not ErrorCode.none:
            return [error] * len(offsets)
        errors, good = await self._checked(offsets, keep_timestamps=True)
        if good:
            await self.meta.commit_offsets(group_id, good)
        return errors

    async def _checked(
        self, offsets: Sequence[OffsetToCommit], *, keep_timestamps: bool
    ) -> tuple[list[ErrorCode], list[CommittedOffset]]:
        """Each offset's error (an unknown partition, metadata over the limit) in order,
        and the offsets to store, stamped now (or at the commit timestamp a v1 request
        gave, when `keep_timestamps`)."""
        errors: list[ErrorCode] = []
        good: list[CommittedOffset] = []
        stamp = self.clock.wall_ms()
        for o in offsets:
            e = await self._partition_error(o.topic, o.partition)
            if e is ErrorCode.none and len((o.metadata or "").encode()) > OFFSET_METADATA_MAX_BYTES:
                e = ErrorCode.offset_metadata_too_large
            errors.append(e)
            if e is ErrorCode.none:
                when = o.commit_timestamp if keep_timestamps and o.commit_timestamp != -1 else stamp
                good.append(
                    CommittedOffset(
                        o.topic, o.partition, o.offset, o.leader_epoch, o.metadata or "", when
                    )
                )
        return errors, good

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        offsets_partition: int,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: Sequence[OffsetToCommit],
    ) -> list[ErrorCode]:
        """TxnOffsetCommit: the offsets pending under the producer's transaction (the
        group's only once its marker commits them: PendingOffsetStore), checked as Kafka
        4's validateTransactionalOffsetCommit checks them: an unknown group with a
        generation below 0 becomes a simple group, with one ILLEGAL_GENERATION; a member's
        stale epoch is ILLEGAL_GENERATION too. One error code per offset, in order."""
        group = await self.get(group_id)
        if group is None:
            if generation >= 0:
                return [ErrorCode.illegal_generation] * len(offsets)
            group = ClassicGroup(group_id, self.config)
            self.adopt(group)
            await self.save(group)
        check = getattr(group, "validate_commit", None)
        error = (
            check(member_id, instance_id, generation, transactional=True)
            if check is not None
            else ErrorCode.none
        )
        if error is ErrorCode.stale_member_epoch:
            error = ErrorCode.illegal_generation
        if error is not ErrorCode.none:
            return [error] * len(offsets)
        errors, good = await self._checked(offsets, keep_timestamps=False)
        if good:
            await self.pending.txn_commit_offsets(group_id, producer_id, offsets_partition, good)
        return errors

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[CommittedOffset]]:
        """Committed offsets of `partitions` (all when None); -1 where none was committed."""
        group = await self.get(group_id)
        if group is not None and member_id is not None:
            check = getattr(group, "validate_fetch", None)
            if check is not None:
                error: ErrorCode = check(member_id, member_epoch)
                if error is not ErrorCode.none:
                    return error, []
        committed = await self.meta.fetch_offsets(group_id)
        if partitions is None:
            return ErrorCode.none, committed
        by_key = {(c.topic, c.partition): c for c in committed}
        return ErrorCode.none, [
            by_key.get((t, p)) or CommittedOffset(t, p, -1, -1, "", -1) for t, p in partitions
        ]

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        group = await self.get(group_id)
        if group is None:
            if not await self.meta.fetch_offsets(group_id):
                return ErrorCode.group_id_not_found, []
        subscribed: set[str] | None = set()
        if group is not None and not group.is_empty():
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return ErrorCode.non_empty_group, []
        errors = []
        doomed = []
        for t, p in partitions:
            e = await self._partition_error(t, p)
            if e is ErrorCode.none and subscribed is not None and t in subscribed:
                e = ErrorCode.group_subscribed_to_topic
            errors.append(e)
            if e is ErrorCode.none:
                doomed.append((t, p))
        if doomed:
            await self.meta.delete_offsets(group_id, doomed)
            log.info("group %r: offsets of %s deleted (by %s)", group_id, doomed, who())
        return ErrorCode.none, errors

    # -- describing -------------------------------------------------------------
    async def describe_classic(self, group_id: str) -> ClassicGroupDescription:
        return describe_classic(await self.get(group_id) if group_id else None)

    # -- admin ------------------------------------------------------------------
    async def list_groups(self) -> list[GroupSummary]:
        """Every group in the store, as this node knows it (loaded ones from memory; the
        others from their saved state, without taking them over)."""
        summaries = []
        for record in await self.meta.list_groups():
            group = self.groups.get(record.group_id)
            if group is None:
                loader = self._loaders.get(record.group_type)
                if loader is None:
                    continue
                group = loader(record.group_id, self.config, record.state, now_ms(self.clock))
            protocol_type = getattr(group, "protocol_type", None) or (
                "consumer" if group.group_type == "consumer" else ""
            )
            summaries.append(
                GroupSummary(group.group_id, group.group_type, protocol_type, group.state_name)
            )
        return summaries

    async def delete_group(self, group_id: str) -> ErrorCode:
        group = await self.get(group_id)
        if group is None:
            if not await self.meta.fetch_offsets(group_id):
                return ErrorCode.group_id_not_found
        elif not group.is_empty():
            return ErrorCode.non_empty_group
        async with self._lock(group_id):
            removed = self.groups.pop(group_id, None)
            if isinstance(removed, ClassicGroup):
                removed.state = GroupState.DEAD
            self._saved.pop(group_id, None)
            await self.meta.delete_group(group_id)
        log.info("group %r: deleted (by %s)", group_id, who())
        return ErrorCode.none
