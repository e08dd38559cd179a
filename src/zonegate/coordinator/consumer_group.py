"""The KIP-848 consumer group state machine (ConsumerGroupHeartbeat), after Kafka's
GroupMetadataManager, ConsumerGroup and CurrentAssignmentBuilder.

Three epochs drive it. The group epoch is bumped whenever what the assignment
depends on changes: a member joins, leaves or changes its subscription, or a
subscribed topic appears, disappears or gains partitions. The target
assignment (computed by the server-side assignor) is recomputed at the next
heartbeat when the group epoch is ahead of it, and carries that epoch. Each
member then reconciles towards its target one step per heartbeat: it first
gives up what the target takes away (it stays at its epoch, UNREVOKED_PARTITIONS,
until its heartbeat no longer lists them, or its rebalance timeout fences it),
then takes the new epoch and only those partitions no other member still holds
(the rest wait, UNRELEASED_PARTITIONS). So a partition is never owned by two
members at once.

Member epochs in a request: 0 joins (or rejoins after being fenced), -1 leaves,
-2 is a static member leaving for a while (it keeps its partitions until its
session expires or its instance id comes back). Heartbeats answer at once, so
there are no futures; time is passed in as ms and `tick` expires sessions and
revocation deadlines.

Regex subscriptions are matched with Python's `re` (full match), not RE2 as
in Kafka: most RE2 syntax means the same, but `re` backtracks, so a
pathological pattern from a client could take long on a long topic name.
"""

from __future__ import annotations

import enum
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.coordinator.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, AssignorMember
from zonegate.coordinator.classic import GroupConfig
from zonegate.metastore.models import TopicInfo

TopicId = uuid.UUID
Parts = dict[TopicId, frozenset[int]]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
JOIN_EPOCH = 0
MEMBER_ID_REQUIRED_VERSION = 1  # from v1 the client generates its member id
REGEX_REFRESH_MS = 1000.0  # how stale a regex subscription's topic list may be


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """The broker's `group.consumer.*` settings in force for a group."""

    heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size

    def for_group(self, own: Mapping[str, str]) -> ConsumerGroupSettings:
        """These settings under a group's own configs (KIP-848's group configs,
        `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`, set by
        IncrementalAlterConfigs on the group and checked then)."""
        session = own.get("consumer.session.timeout.ms")
        heartbeat = own.get("consumer.heartbeat.interval.ms")
        if session is None and heartbeat is None:
            return self
        return replace(
            self,
            session_timeout_ms=self.session_timeout_ms if session is None else int(session),
            heartbeat_interval_ms=(
                self.heartbeat_interval_ms if heartbeat is None else int(heartbeat)
            ),
        )


@dataclass(frozen=True, slots=True)
class Topics:
    """The cluster's topics as the group sees them: one by name, and every name (regexes)."""

    lookup: Callable[[str], TopicInfo | None]
    names: Callable[[], Iterable[str]]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[TopicId, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Parts | None = None  # None: unchanged since the member last heard


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Parts = field(default_factory=dict)
    pending_revocation: Parts = field(default_factory=dict)
    session_deadline: float = 0.0
    revocation_deadline: float | None = None

    def reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.epoch == epoch

    def to_json(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "subscribed_topic_names": list(self.subscribed_topic_names),
            "subscribed_topic_regex": self.subscribed_topic_regex,
            "server_assignor": self.server_assignor,
            "epoch": self.epoch,
            "previous_epoch": self.previous_epoch,
            "state": self.state.value,
            "assigned": _parts_to_json(self.assigned),
            "pending_revocation": _parts_to_json(self.pending_revocation),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ConsumerMember:
        return cls(
            member_id=d["member_id"],
            instance_id=d["instance_id"],
            rack_id=d["rack_id"],
            client_id=d["client_id"],
            client_host=d["client_host"],
            rebalance_timeout_ms=d["rebalance_timeout_ms"],
            subscribed_topic_names=tuple(d["subscribed_topic_names"]),
            subscribed_topic_regex=d["subscribed_topic_regex"],
            server_assignor=d["server_assignor"],
            epoch=d["epoch"],
            previous_epoch=d["previous_epoch"],
            state=MemberState(d["state"]),
            assigned=_parts_from_json(d["assigned"]),
            pending_revocation=_parts_from_json(d["pending_revocation"]),
        )


def _parts_to_json(parts: Parts) -> dict[str, list[int]]:
    return {str(tid): sorted(ps) for tid, ps in parts.items()}


def _parts_from_json(d: dict[str, list[int]]) -> Parts:
    return {uuid.UUID(tid): frozenset(ps) for tid, ps in d.items()}


def _fail(error: ErrorCode, message: str) -> HeartbeatResult:
    return HeartbeatResult(error, message)


def validate_request(req: HeartbeatRequest) -> HeartbeatResult | None:
    """Kafka's checks of the fields alone (throwIfConsumerGroupHeartbeatRequestIsInvalid)."""
    bad = ErrorCode.invalid_request
    if req.instance_id == "":
        return _fail(bad, "InstanceId can't be empty.")
    if req.rack_id == "":
        return _fail(bad, "RackId can't be empty.")
    if req.api_version >= MEMBER_ID_REQUIRED_VERSION and not req.member_id:
        return _fail(bad, "MemberId can't be empty.")
    if req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
        if not req.member_id:
            return _fail(bad, "MemberId can't be empty.")
    elif req.member_epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            return _fail(bad, "RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or any(parts for _, parts in req.owned):
            return _fail(bad, "TopicPartitions must be empty when (re-)joining.")
        if not req.subscribed_topic_names and not req.subscribed_topic_regex:
            return _fail(
                bad, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if not req.member_id:
            return _fail(bad, "MemberId can't be empty.")
        if req.instance_id is None:
            return _fail(bad, "InstanceId can't be null.")
    else:
        return _fail(bad, "MemberEpoch is invalid.")
    if req.rebalance_timeout_ms < -1:
        return _fail(bad, "RebalanceTimeoutMs can't be negative.")
    if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
        return _fail(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {req.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(sorted(ASSIGNORS))}.",
        )
    if req.subscribed_topic_regex:  # "" says "no regex" (librdkafka sends it so)
        try:
            re.compile(req.subscribed_topic_regex)
        except re.error as e:
            return _fail(
                ErrorCode.invalid_regular_expression,
                f"SubscribedTopicRegex {req.subscribed_topic_regex!r} is invalid: {e}",
            )
    return None


def _owned_map(owned: Sequence[tuple[TopicId, Sequence[int]]] | None) -> Parts | None:
    if owned is None:
        return None
    out: dict[TopicId, set[int]] = {}
    for tid, parts in owned:
        out.setdefault(tid, set()).update(parts)
    return {tid: frozenset(ps) for tid, ps in out.items()}


def _owns_any(owned: Parts | None, parts: Parts) -> bool:
    """Whether the member still reports owning any of `parts` (unknown when it sent no list)."""
    if owned is None:
        return True
    return any(owned.get(tid, frozenset()) & ps for tid, ps in parts.items())


def _is_subset(owned: Parts | None, parts: Parts) -> bool:
    if owned is None:
        return False
    return all(ps <= parts.get(tid, frozenset()) for tid, ps in owned.items() if ps)


def _nonempty(parts: Mapping[TopicId, Iterable[int]]) -> Parts:
    return {tid: frozenset(ps) for tid, ps in parts.items() if ps}


class ConsumerGroup:
    group_type = "consumer"

    def __init__(
        self,
        group_id: str,
        config: GroupConfig,
        settings: ConsumerGroupSettings | None = None,
    ) -> None:
        self.group_id = group_id
        self.config = config
        self.settings = settings or ConsumerGroupSettings()
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Parts] = {}  # member id -> target assignment
        # The subscribed topics that exist: name -> (topic id, partition count). A change
        # of it bumps the group epoch (new topics, added partitions, deleted topics).
        self.subscription: dict[str, tuple[TopicId, int]] = {}
        self._member_topics: dict[str, frozenset[str]] = {}  # resolved names and regexes
        self._regex_hits: dict[str, tuple[float, frozenset[str]]] = {}
        self.version = 0  # bumped on every change worth persisting

    # -- queries -----------------------------------------------------------
    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str] | None:
        topics: set[str] = set(self.subscription)
        for m in self.members.values():
            topics.update(m.subscribed_topic_names)
        return topics

    def preferred_assignor(self) -> str:
        """The assignor most members asked for (Kafka's rule); uniform when none did."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return DEFAULT_ASSIGNOR
        return max(sorted(counts), key=lambda name: counts[name])

    def topic_name(self, topic_id: TopicId) -> str | None:
        return next((n for n, (tid, _) in self.subscription.items() if tid == topic_id), None)

    def next_deadline(self) -> float | None:
        deadlines = [m.session_deadline for m in self.members.values()]
        deadlines += [
            m.revocation_deadline
            for m in self.members.values()
            if m.revocation_deadline is not None
        ]
        return min(deadlines) if deadlines else None

    # -- offsets (KIP-848 rules for OffsetCommit v9 / OffsetFetch v9) ---------
    def validate_commit(
        self,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        transactional: bool = False,  # the same checks (the caller maps a stale epoch)
    ) -> ErrorCode:
        if member_epoch < 0 and not self.members:
            return ErrorCode.none  # admin tools and standalone consumers on an empty group
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def validate_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        if member_id is None and member_epoch < 0:
            return ErrorCode.none
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    # -- the heartbeat ---------------------------------------------------------
    def heartbeat(self, req: HeartbeatRequest, topics: Topics, now: float) -> HeartbeatResult:
        invalid = validate_request(req)
        if invalid is not None:
            return invalid
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        member_id = req.member_id
        if len(self.members) >= self.settings.max_size and member_id not in self.members:
            return _fail(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of "
                f"{self.settings.max_size} members.",
            )
        if not member_id:
            member_id = str(uuid.uuid4())  # v0: the coordinator names new members
        found = self._member_for(req, member_id)
        if isinstance(found, HeartbeatResult):
            return found
        member, replaced = found
        before = (
            member.subscribed_topic_names,
            member.subscribed_topic_regex,
            member.server_assignor,
        )
        old_assigned = dict(member.assigned)
        # A static member taking its old place back is no change of subscription.
        joined = replaced is None and member.member_id not in self.members
        changed = joined or replaced is not None
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            subscribed_topic_names=(
                tuple(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                req.subscribed_topic_regex or None
                if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            server_assignor=(
                req.server_assignor if req.server_assignor is not None else member.server_assignor
            ),
            client_id=req.client_id,
            client_host=req.client_host,
            session_deadline=now + self.settings.session_timeout_ms,
        )
        after = (
            updated.subscribed_topic_names,
            updated.subscribed_topic_regex,
            updated.server_assignor,
        )
        bump = joined or before[:2] != after[:2]
        if replaced is not None:
            self._remove(replaced, keep_target_for=updated.member_id)
        changed = changed or _persisted(member) != _persisted(updated)
        self.members[updated.member_id] = updated
        if updated.instance_id is not None:
            self.static[updated.instance_id] = updated.member_id
        if self._refresh_subscription(topics, now):
            bump = True
        if bump:
            self.group_epoch += 1
            changed = True
        if self.group_epoch > self.assignment_epoch:
            self._compute_target()
            changed = True
        owned = _owned_map(req.owned)
        if self._reconcile(updated, owned, now):
            changed = True
        if changed:
            self.version += 1
        full = req.member_epoch == JOIN_EPOCH or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned is not None
        )
        return HeartbeatResult(
            ErrorCode.none,
            member_id=updated.member_id,
            member_epoch=updated.epoch,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
            assignment=(
                dict(updated.assigned) if full or updated.assigned != old_assigned else None
            ),
        )

    def _member_for(
        self, req: HeartbeatRequest, member_id: str
    ) -> tuple[ConsumerMember, ConsumerMember | None] | HeartbeatResult:
        """The member the request speaks for (new when joining), and the static member it
        replaces; or the error that refuses it."""
        joining = req.member_epoch == JOIN_EPOCH
        owned = _owned_map(req.owned)
        if req.instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                if not joining:
                    return _fail(
                        ErrorCode.unknown_member_id,
                        f"Member {member_id} is not a member of group {self.group_id}.",
                    )
                return ConsumerMember(member_id), None
            error = self._check_epoch(member, req.member_epoch, owned)
            return error if error is not None else (member, None)
        existing_id = self.static.get(req.instance_id)
        existing = self.members.get(existing_id) if existing_id is not None else None
        if joining:
            if existing is None:
                return ConsumerMember(member_id, instance_id=req.instance_id), None
            if existing.member_id == member_id:
                return existing, None  # the same instance rejoining after being fenced
            if existing.epoch != STATIC_LEAVE_EPOCH:
                return _fail(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {req.instance_id} cannot join "
                    f"the group because the instance id is owned by {existing.member_id} member.",
                )
            # The instance is back under a new member id: it takes the old member's place,
            # partitions and target, with no rebalance.
            return replace(existing, member_id=member_id, epoch=0, previous_epoch=0), existing
        if existing is None:
            return _fail(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            return _fail(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by "
                f"member {existing.member_id}.",
            )
        error = self._check_epoch(existing, req.member_epoch, owned)
        return error if error is not None else (existing, None)

    @staticmethod
    def _check_epoch(
        member: ConsumerMember, epoch: int, owned: Parts | None
    ) -> HeartbeatResult | None:
        if epoch == JOIN_EPOCH:
            return None  # a fenced member rejoins under its id (KAFKA-19233)
        if epoch > member.epoch:
            return _fail(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.epoch}). The member must abandon all "
                "its partitions and rejoin.",
            )
        if epoch < member.epoch and (
            epoch != member.previous_epoch or not _is_subset(owned, member.assigned)
        ):
            # The previous epoch is fine when the answer that moved it on was lost.
            return _fail(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.epoch}). The member must abandon all "
                "its partitions and rejoin.",
            )
        return None

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        if req.instance_id is None:
            member = self.members.get(req.member_id)
            if member is None:
                return _fail(
                    ErrorCode.unknown_member_id,
                    f"Member {req.member_id} is not a member of group {self.group_id}.",
                )
        else:
            static_id = self.static.get(req.instance_id)
            member = self.members.get(static_id) if static_id is not None else None
            if member is None:
                return _fail(
                    ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown."
                )
            if member.member_id != req.member_id:
                return _fail(
                    ErrorCode.fenced_instance_id,
                    f"Static member {req.member_id} with instance id {req.instance_id} was "
                    f"fenced by member {member.member_id}.",
                )
            if req.member_epoch == STATIC_LEAVE_EPOCH:
                # Gone for a while: it keeps its partitions (no rebalance) until its session
                # expires or its instance id comes back.
                member.epoch = STATIC_LEAVE_EPOCH
                member.pending_revocation = {}
                member.revocation_deadline = None
                self.version += 1
                return HeartbeatResult(
                    ErrorCode.none, member_id=member.member_id, member_epoch=STATIC_LEAVE_EPOCH
                )
        self.fence(member.member_id)
        return HeartbeatResult(
            ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch
        )

    # -- membership changes ----------------------------------------------------
    def _remove(self, member: ConsumerMember, keep_target_for: str | None = None) -> None:
        self.members.pop(member.member_id, None)
        target = self.target.pop(member.member_id, None)
        if keep_target_for is not None and target is not None:
            self.target[keep_target_for] = target
        self._member_topics.pop(member.member_id, None)
        if (
            member.instance_id is not None
            and self.static.get(member.instance_id) == member.member_id
        ):
            del self.static[member.instance_id]

    def fence(self, member_id: str) -> None:
        """Removes a member (left, expired or too slow to revoke); its partitions are free and
        the group epoch moves on, so the next heartbeat computes a new target assignment."""
        member = self.members.get(member_id)
        if member is None:
            return
        self._remove(member)
        self.group_epoch += 1
        self.version += 1

    def tick(self, now: float) -> None:
        for m in list(self.members.values()):
            if now >= m.session_deadline:
                self.fence(m.member_id)
            elif m.revocation_deadline is not None and now >= m.revocation_deadline:
                self.fence(m.member_id)

    def shutdown(self) -> None:
        pass  # heartbeats answer at once: nothing waits

    def update_settings(self, settings: ConsumerGroupSettings) -> None:
        if settings != self.settings:
            self.settings = settings
            self.version += 1

    # -- subscriptions and the target assignment --------------------------------
    def _regex_topics(self, regex: str, topics: Topics, now: float) -> frozenset[str]:
        hit = self._regex_hits.get(regex)
        if hit is not None and now - hit[0] < REGEX_REFRESH_MS:
            return hit[1]
        pattern = re.compile(regex)
        names = frozenset(n for n in topics.names() if pattern.fullmatch(n))
        self._regex_hits[regex] = (now, names)
        return names

    def _refresh_subscription(self, topics: Topics, now: float) -> bool:
        """Resolves every member's subscription; True when the subscribed topics (or their
        partition counts) changed."""
        resolved: dict[str, frozenset[str]] = {}
        for m in self.members.values():
            names = frozenset(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                names |= self._regex_topics(m.subscribed_topic_regex, topics, now)
            resolved[m.member_id] = names
        wanted = set().union(*resolved.values()) if resolved else set()
        live = {r for m in self.members.values() if (r := m.subscribed_topic_regex) is not None}
        for regex in [r for r in self._regex_hits if r not in live]:
            del self._regex_hits[regex]
        subscription: dict[str, tuple[TopicId, int]] = {}
        for name in sorted(wanted):
            info = topics.lookup(name)
            if info is not None and info.partitions:
                subscription[name] = (info.topic_id, len(info.partitions))
        self._member_topics = resolved
        if subscription == self.subscription:
            return False
        self.subscription = subscription
        return True

    def _compute_target(self) -> None:
        ids = {name: tid for name, (tid, _) in self.subscription.items()}
        members = {
            mid: AssignorMember(
                mid,
                m.instance_id,
                frozenset(ids[n] for n in self._member_topics.get(mid, ()) if n in ids),
                self.target.get(mid, {}),
            )
            for mid, m in self.members.items()
        }
        partitions = {tid: count for tid, count in self.subscription.values()}
        assignor = ASSIGNORS[self.preferred_assignor()]
        self.target = {
            mid: _nonempty(parts) for mid, parts in assignor(members, partitions).items()
        }
        self.assignment_epoch = self.group_epoch

    def _held_elsewhere(self, member_id: str) -> set[tuple[TopicId, int]]:
        held: set[tuple[TopicId, int]] = set()
        for m in self.members.values():
            if m.member_id == member_id:
                continue
            for parts in (m.assigned, m.pending_revocation):
                held.update((tid, p) for tid, ps in parts.items() for p in ps)
        return held

    def _reconcile(self, m: ConsumerMember, owned: Parts | None, now: float) -> bool:
        """One step of the member towards its target (Kafka's CurrentAssignmentBuilder).
        True when the member changed."""
        epoch = self.assignment_epoch
        if m.reconciled_to(epoch):
            return False
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(owned, m.pending_revocation):
                return False
            next_epoch = m.epoch + 1
        else:
            next_epoch = m.epoch
        before = _persisted(m)
        self._next_assignment(m, next_epoch, owned, now)
        return _persisted(m) != before

    def _next_assignment(
        self, m: ConsumerMember, member_epoch: int, owned: Parts | None, now: float
    ) -> None:
        target = self.target.get(m.member_id, {})
        held = self._held_elsewhere(m.member_id)
        keep: dict[TopicId, frozenset[int]] = {}
        revoke: dict[TopicId, frozenset[int]] = {}
        gain: dict[TopicId, frozenset[int]] = {}
        unreleased = False
        for tid in set(target) | set(m.assigned):
            want = target.get(tid, frozenset())
            have = m.assigned.get(tid, frozenset())
            keep[tid] = have & want
            revoke[tid] = have - want
            pending = want - keep[tid]
            free = frozenset(p for p in pending if (tid, p) not in held)
            unreleased = unreleased or free != pending
            gain[tid] = free
        keep, revoke, gain = _nonempty(keep), _nonempty(revoke), _nonempty(gain)
        previous = m.epoch
        if revoke and _owns_any(owned, revoke):
            # Give up first; the epoch waits until the member's heartbeat no longer lists them.
            m.state = MemberState.UNREVOKED_PARTITIONS
            m.assigned = keep
            m.pending_revocation = revoke
            if member_epoch != m.epoch:
                m.previous_epoch, m.epoch = m.epoch, member_epoch
            if previous != m.epoch or m.revocation_deadline is None:
                m.revocation_deadline = now + max(m.rebalance_timeout_ms, 0)
            return
        for tid, ps in gain.items():
            keep[tid] = keep.get(tid, frozenset()) | ps
        m.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        m.assigned = keep
        m.pending_revocation = {}
        m.revocation_deadline = None
        if self.assignment_epoch != m.epoch:
            m.previous_epoch, m.epoch = m.epoch, self.assignment_epoch

    # -- persistence -------------------------------------------------------------
    def snapshot(self) -> str:
        return json.dumps(
            {
                "group_epoch": self.group_epoch,
                "assignment_epoch": self.assignment_epoch,
                "members": [m.to_json() for m in self.members.values()],
                "target": {mid: _parts_to_json(parts) for mid, parts in self.target.items()},
                "subscription": {n: [str(tid), c] for n, (tid, c) in self.subscription.items()},
                "settings": {
                    "heartbeat_interval_ms": self.settings.heartbeat_interval_ms,
                    "session_timeout_ms": self.settings.session_timeout_ms,
                    "max_size": self.settings.max_size,
                },
            },
            sort_keys=True,
        )

    @classmethod
    def restore(
        cls, group_id: str, config: GroupConfig, state_json: str, now_ms: float
    ) -> ConsumerGroup:
        """A group as saved; every member gets a full session (and revocation time) from now,
        as a coordinator taking a group over cannot know when they last heartbeated."""
        d = json.loads(state_json)
        group = cls(group_id, config, ConsumerGroupSettings(**d["settings"]))
        group.group_epoch = d["group_epoch"]
        group.assignment_epoch = d["assignment_epoch"]
        group.subscription = {n: (uuid.UUID(tid), c) for n, (tid, c) in d["subscription"].items()}
        group.target = {mid: _parts_from_json(p) for mid, p in d["target"].items()}
        for md in d["members"]:
            m = ConsumerMember.from_json(md)
            m.session_deadline = now_ms + group.settings.session_timeout_ms
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                m.revocation_deadline = now_ms + max(m.rebalance_timeout_ms, 0)
            group.members[m.member_id] = m
            if m.instance_id is not None:
                group.static[m.instance_id] = m.member_id
        ids = {tid: n for n, (tid, _) in group.subscription.items()}
        for mid, m in group.members.items():
            # Until the next heartbeat resolves regexes again, the saved topics stand in.
            names = set(m.subscribed_topic_names)
            names.update(ids[tid] for tid in group.target.get(mid, {}) if tid in ids)
            group._member_topics[mid] = frozenset(names)
        return group


def _persisted(m: ConsumerMember) -> dict[str, Any]:
    return m.to_json()
