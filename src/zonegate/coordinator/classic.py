"""The classic group protocol's state machine (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).

Kafka's states and transitions (GroupCoordinator, `group.initial.rebalance.delay.ms`,
KIP-394 member ids, KIP-345 static members):

    Empty --join--> PreparingRebalance --all joined or timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join, leave, expiry--> PreparingRebalance
    any --last member gone--> Empty;  deleted --> Dead

Waiting requests (a JoinGroup until the rebalance completes, a follower's
SyncGroup until the leader's) are futures completed by the transitions. Time is
passed in (`now` in ms) and `tick` enforces session, rebalance and pending-member
deadlines, so the machine never blocks and a silent member can never stall the
group beyond its timeouts.
"""

from __future__ import annotations

import asyncio
import enum
import json
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1  # group.max.size


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """What a JoinGroup says about the member."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+ (KIP-394)


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    # For the leader: (member id, group instance id, metadata) of every member.
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_seen_ms: float
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None

    def refresh(self, req: JoinRequest, now: float) -> None:
        self.client_id, self.client_host = req.client_id, req.client_host
        self.session_timeout_ms = req.session_timeout_ms
        self.rebalance_timeout_ms = req.rebalance_timeout_ms
        self.last_seen_ms = now

    def metadata_for(self, protocol: str) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


def _resolve(waiter: asyncio.Future[Any] | None, result: Any) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)


class ClassicGroup:
    group_type = "classic"

    def __init__(self, group_id: str, config: GroupConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.pending: dict[str, float] = {}  # KIP-394: member id -> expiry (ms)
        self.static: dict[str, str] = {}  # group instance id -> member id
        self.rebalance_deadline_ms = 0.0
        self.initial_delay_until_ms = 0.0
        self.sync_deadline_ms = 0.0
        self.version = 0  # bumped on every change worth persisting

    # -- queries -----------------------------------------------------------
    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return not self.members and not self.pending

    def _candidates(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def _supports(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self._candidates() & set(names))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        from zonegate.coordinator.consumer_protocol import subscription_topics

        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscription_topics(m.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def _changed(self) -> None:
        self.version += 1

    def check_member(
        self, member_id: str, instance_id: str | None, generation: int | None
    ) -> ErrorCode:
        """The checks Heartbeat, SyncGroup and OffsetCommit share."""
        if instance_id is not None and instance_id in self.static:
            if self.static[instance_id] != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        if generation is not None and generation != self.generation:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def validate_commit(
        self, member_id: str, instance_id: str | None, generation: int, transactional: bool = False
    ) -> ErrorCode:
        """Kafka's rules: members commit in their generation; others only to an empty group.
        A transactional commit (TxnOffsetCommit) with no member may go to any group, and
        the rebalance state does not matter to it (Kafka 4's validateOffsetCommit)."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation >= 0 or member_id or instance_id is not None:
            error = self.check_member(member_id, instance_id, generation)
            if error is not ErrorCode.none:
                return error
        elif self.state is not GroupState.EMPTY and not transactional:
            return ErrorCode.unknown_member_id
        if self.state is GroupState.COMPLETING_REBALANCE and not transactional:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # -- JoinGroup ----------------------------------------------------------
    def join(self, req: JoinRequest, now: float) -> JoinResult | asyncio.Future[JoinResult]:
        cfg = self.config
        member_id = req.member_id
        if not (cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms):
            return JoinResult(ErrorCode.invalid_session_timeout, member_id)
        if self.state is GroupState.DEAD:
            return JoinResult(ErrorCode.coordinator_not_available, member_id)
        names = [name for name, _ in req.protocols]
        if len(set(names)) != len(names):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        known = member_id in self.members
        replaced = (
            self.static.get(req.instance_id) if req.instance_id is not None and not known else None
        )
        if known or replaced is not None:
            current = self.members[replaced if replaced is not None else member_id]
            others = [m for m in self.members.values() if m is not current]
            sets = [{n for n, _ in m.protocols} for m in others]
            common = set.intersection(*sets) if sets else set(names)
            if req.protocol_type != self.protocol_type or not (common & set(names)):
                return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        elif not self._supports(req.protocol_type, names):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)

        if member_id == "":
            return self._join_unknown(req, now)
        if member_id in self.pending:
            del self.pending[member_id]
            return self._add_member(req, member_id, now)
        if req.instance_id is not None and req.instance_id in self.static:
            if self.static[req.instance_id] != member_id:
                return JoinResult(ErrorCode.fenced_instance_id, member_id)
        if not known:
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        member = self.members[member_id]
        same = member.protocols == req.protocols
        member.refresh(req, now)
        if self.state is GroupState.COMPLETING_REBALANCE and same:
            return self._join_result(member)
        if self.state is GroupState.STABLE and same and member_id != self.leader_id:
            return self._join_result(member)
        return self._rejoin(member, req, now)

    def _rejoin(self, member: Member, req: JoinRequest, now: float) -> asyncio.Future[JoinResult]:
        """The member waits in a rebalance (started now unless one is under way)."""
        member.protocols = req.protocols
        self._prepare_rebalance(now)
        waiter = self._await_join(member)
        self.maybe_complete_join(now)
        return waiter

    def _join_unknown(
        self, req: JoinRequest, now: float
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if len(self.members) + len(self.pending) >= self.config.max_size:
            return JoinResult(ErrorCode.group_max_size_reached)
        new_id = f"{req.instance_id or req.client_id}-{uuid.uuid4()}"
        if req.instance_id is not None and req.instance_id in self.static:
            return self._replace_static(req, req.instance_id, new_id, now)
        if req.instance_id is None and req.require_known_member_id:
            self.pending[new_id] = now + req.session_timeout_ms
            return JoinResult(ErrorCode.member_id_required, new_id)
        return self._add_member(req, new_id, now)

    def _replace_static(
        self, req: JoinRequest, instance_id: str, new_id: str, now: float
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """KIP-345: a static member rejoining under a new member id takes over its old place."""
        old_id = self.static[instance_id]
        member = self.members.pop(old_id)
        _resolve(member.join_waiter, JoinResult(ErrorCode.fenced_instance_id, old_id))
        _resolve(member.sync_waiter, SyncResult(ErrorCode.fenced_instance_id))
        member.join_waiter = member.sync_waiter = None
        same = member.protocols == req.protocols
        member.member_id = new_id
        member.refresh(req, now)
        self.members[new_id] = member
        self.static[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        self._changed()
        if self.state is GroupState.STABLE and same:
            # No rebalance: the member gets its old assignment back at SyncGroup.
            is_leader = new_id == self.leader_id
            return self._join_result(member, skip_assignment=is_leader)
        return self._rejoin(member, req, now)

    def _add_member(
        self, req: JoinRequest, member_id: str, now: float
    ) -> asyncio.Future[JoinResult]:
        member = Member(
            member_id,
            req.instance_id,
            req.client_id,
            req.client_host,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.protocol_type,
            req.protocols,
            now,
        )
        if not self.members:
            self.protocol_type = req.protocol_type
        self.members[member_id] = member
        if req.instance_id is not None:
            self.static[req.instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        self._changed()
        return self._rejoin(member, req, now)

    def _await_join(self, member: Member) -> asyncio.Future[JoinResult]:
        _resolve(member.join_waiter, JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.join_waiter = asyncio.get_running_loop().create_future()
        return member.join_waiter

    def _join_result(self, member: Member, *, skip_assignment: bool = False) -> JoinResult:
        is_leader = member.member_id == self.leader_id
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if is_leader and self.protocol_name is not None:
            members = tuple(
                (m.member_id, m.instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()
            )
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            self.generation,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            skip_assignment,
            members,
        )

    def _prepare_rebalance(self, now: float) -> None:
        if self.state is GroupState.PREPARING_REBALANCE:
            return
        if self.state is GroupState.COMPLETING_REBALANCE:
            for m in self.members.values():
                m.assignment = b""
                _resolve(m.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
                m.sync_waiter = None
        initial = self.state is GroupState.EMPTY
        self.state = GroupState.PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.rebalance_deadline_ms = now + timeout
        delay = min(self.config.initial_rebalance_delay_ms, timeout) if initial else 0
        self.initial_delay_until_ms = now + delay
        self._changed()

    def maybe_complete_join(self, now: float) -> None:
        if self.state is not GroupState.PREPARING_REBALANCE:
            return
        if now < self.initial_delay_until_ms:
            # Kafka's initial delay: wait for more first members, up to the rebalance timeout.
            return
        self.initial_delay_until_ms = 0.0
        everyone = all(m.join_waiter is not None for m in self.members.values())
        if (everyone and not self.pending) or now >= self.rebalance_deadline_ms:
            self._complete_join(now)

    def _complete_join(self, now: float) -> None:
        for m in [m for m in self.members.values() if m.join_waiter is None]:
            self._remove(m.member_id)
        self.pending.clear()
        self.generation += 1
        self._changed()
        if not self.members:
            # The protocol type stays, as Kafka keeps it: an emptied consumer group is still
            # listed (ListGroups, DescribeGroups) as a "consumer" group, not a simple one.
            self.state = GroupState.EMPTY
            self.protocol_name = self.leader_id = None
            return
        candidates = self._candidates()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values()))
        self.protocol_name = max(
            (name for name, _ in first.protocols if name in candidates),
            key=lambda name: votes[name],
        )
        if self.leader_id not in self.members:
            self.leader_id = first.member_id
        self.state = GroupState.COMPLETING_REBALANCE
        self.sync_deadline_ms = now + max(m.rebalance_timeout_ms for m in self.members.values())
        for m in self.members.values():
            m.last_seen_ms = now
            waiter, m.join_waiter = m.join_waiter, None
            _resolve(waiter, self._join_result(m))

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        if member.instance_id is not None and self.static.get(member.instance_id) == member_id:
            del self.static[member.instance_id]
        _resolve(member.join_waiter, JoinResult(ErrorCode.unknown_member_id, member_id))
        _resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self._changed()

    # -- SyncGroup ----------------------------------------------------------
    def sync(
        self,
        *,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now: float,
    ) -> SyncResult | asyncio.Future[SyncResult]:
        error = self.check_member(member_id, instance_id, generation)
        if error is not ErrorCode.none:
            return SyncResult(error)
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
            protocol_name is not None and protocol_name != self.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        member = self.members[member_id]
        member.last_seen_ms = now
        if self.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if self.state is GroupState.STABLE:
            return self._sync_result(member)
        # CompletingRebalance
        _resolve(member.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = asyncio.get_running_loop().create_future()
        waiter = member.sync_waiter
        if member_id == self.leader_id:
            for m in self.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self.state = GroupState.STABLE
            self._changed()
            for m in self.members.values():
                w, m.sync_waiter = m.sync_waiter, None
                _resolve(w, self._sync_result(m))
        return waiter

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.none, self.protocol_type, self.protocol_name, member.assignment)

    # -- Heartbeat and LeaveGroup -------------------------------------------
    def heartbeat(
        self, *, member_id: str, instance_id: str | None, generation: int, now: float
    ) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if self.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        error = self.check_member(member_id, instance_id, generation)
        if error is not ErrorCode.none:
            return error
        self.members[member_id].last_seen_ms = now
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, member_id: str, instance_id: str | None, now: float) -> ErrorCode:
        if instance_id is not None:
            current = self.static.get(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if member_id and member_id != current:
                return ErrorCode.fenced_instance_id
            member_id = current
        if member_id in self.pending:
            del self.pending[member_id]
            self.maybe_complete_join(now)
            return ErrorCode.none
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        self._remove(member_id)
        self._after_removal(now)
        return ErrorCode.none

    def _after_removal(self, now: float) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now)
        if not self.members and self.state is GroupState.PREPARING_REBALANCE:
            self._complete_join(now)
        self.maybe_complete_join(now)

    # -- time ---------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Expires silent members and pending ids, and completes timed-out rebalances."""
        for pid, expiry in list(self.pending.items()):
            if now >= expiry:
                del self.pending[pid]
        expired = [
            m.member_id
            for m in self.members.values()
            if m.join_waiter is None
            and m.sync_waiter is None
            and now - m.last_seen_ms >= m.session_timeout_ms
        ]
        for member_id in expired:
            self._remove(member_id)
        if expired:
            self._after_removal(now)
        if self.state is GroupState.COMPLETING_REBALANCE and now >= self.sync_deadline_ms:
            # The leader never sent its assignment: drop who did not sync, start again.
            for m in [m for m in self.members.values() if m.sync_waiter is None]:
                self._remove(m.member_id)
            self._prepare_rebalance(now)
            self._after_removal(now)
        self.maybe_complete_join(now)

    def next_deadline(self) -> float | None:
        """The earliest time `tick` could change something (None: nothing pending)."""
        times: list[float] = list(self.pending.values())
        times += [
            m.last_seen_ms + m.session_timeout_ms
            for m in self.members.values()
            if m.join_waiter is None and m.sync_waiter is None  # waiting members stay alive
        ]
        if self.state is GroupState.PREPARING_REBALANCE:
            times.append(self.rebalance_deadline_ms)
            if self.initial_delay_until_ms:
                times.append(self.initial_delay_until_ms)
        if self.state is GroupState.COMPLETING_REBALANCE:
            times.append(self.sync_deadline_ms)
        return min(times, default=None)

    def shutdown(self) -> None:
        """The coordinator moved away: waiting members must look it up again."""
        for m in self.members.values():
            _resolve(m.join_waiter, JoinResult(ErrorCode.not_coordinator, m.member_id))
            _resolve(m.sync_waiter, SyncResult(ErrorCode.not_coordinator))
            m.join_waiter = m.sync_waiter = None

    # -- persistence --------------------------------------------------------
    def snapshot(self) -> str:
        """What survives a coordinator restart or move: the generation and its assignment.

        A group caught mid-rebalance is saved as its last stable generation's
        members; after a move they rejoin (their JoinGroup/SyncGroup waits fail
        with NOT_COORDINATOR) and the group rebalances.
        """
        return json.dumps(
            {
                "generation": self.generation,
                "protocol_type": self.protocol_type,
                "protocol_name": self.protocol_name,
                "leader": self.leader_id,
                "stable": self.state is GroupState.STABLE,
                "members": [
                    {
                        "id": m.member_id,
                        "instance": m.instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "session_ms": m.session_timeout_ms,
                        "rebalance_ms": m.rebalance_timeout_ms,
                        "protocols": [[n, md.hex()] for n, md in m.protocols],
                        "assignment": m.assignment.hex(),
                    }
                    for m in self.members.values()
                ],
            }
        )

    @classmethod
    def restore(cls, group_id: str, config: GroupConfig, state: str, now: float) -> ClassicGroup:
        group = cls(group_id, config)
        if not state:
            return group
        data = json.loads(state)
        group.generation = int(data["generation"])
        group.protocol_type = data["protocol_type"]
        group.protocol_name = data["protocol_name"]
        group.leader_id = data["leader"]
        for d in data["members"]:
            member = Member(
                d["id"],
                d["instance"],
                d["client_id"],
                d["client_host"],
                int(d["session_ms"]),
                int(d["rebalance_ms"]),
                group.protocol_type or "",
                [(n, bytes.fromhex(md)) for n, md in d["protocols"]],
                now,
                bytes.fromhex(d["assignment"]),
            )
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static[member.instance_id] = member.member_id
        if group.members:
            group.state = GroupState.STABLE
            if not data["stable"]:
                group._prepare_rebalance(now)
        else:
            group.protocol_name = group.leader_id = None
        return group
