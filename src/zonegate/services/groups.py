"""Consumer groups on the node that coordinates them, wherever the client connected.

`RoutedGroups` is what handlers call. A call about a group this node owns is
served by its group coordinator (coordinator/); one about a group another
node owns goes to that node as a group call (the method and its arguments,
services/group_wire.py) over the leader RPC, and the owner's coordinator
serves it directly, without passing through its Kafka front.
Clients keep all their connections inside their zone; only group metadata
crosses, counted as forwarding RPC bytes.

When the owner cannot be reached (it died), the call waits, up to a lease and
a bit, for the membership to name another owner, and goes there (or is served
here). If none can be reached, or a node is asked about a group it does not
own (two nodes briefly disagreeing about live members), the answer carries
NOT_COORDINATOR and the client looks the coordinator up again, as Kafka
clients do after losing theirs.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from zonegate.coordinator import consumer_service
from zonegate.coordinator.classic import JoinRequest, JoinResult, SyncResult
from zonegate.coordinator.consumer_group import HeartbeatRequest, HeartbeatResult
from zonegate.coordinator.describe import ClassicGroupDescription, ConsumerGroupDescription
from zonegate.coordinator.service import GroupCoordinator, GroupSummary, OffsetToCommit
from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.metastore.models import CommittedOffset
from zonegate.runtime.clock import Clock
from zonegate.services import group_wire

log = logging.getLogger(__name__)


# What each call answers when no coordinator can serve it: NOT_COORDINATOR, in the
# call's own shape, so the client looks the coordinator up again.
_NOT_COORDINATOR: dict[str, Callable[..., Any]] = {
    "join": lambda gid, req: JoinResult(ErrorCode.not_coordinator, req.member_id),
    "sync": lambda gid, **kw: SyncResult(ErrorCode.not_coordinator),
    "heartbeat": lambda *a: ErrorCode.not_coordinator,
    "leave": lambda gid, members: (
        ErrorCode.not_coordinator,
        [ErrorCode.not_coordinator] * len(members),
    ),
    "commit_offsets": lambda gid, gen, mid, iid, offsets: (
        [ErrorCode.not_coordinator] * len(offsets)
    ),
    "txn_commit_offsets": lambda gid, pid, part, gen, mid, iid, offsets: (
        [ErrorCode.not_coordinator] * len(offsets)
    ),
    "fetch_offsets": lambda *a: (ErrorCode.not_coordinator, []),
    "delete_offsets": lambda *a: (ErrorCode.not_coordinator, []),
    "delete_group": lambda *a: ErrorCode.not_coordinator,
    "describe_classic": lambda *a: ClassicGroupDescription(ErrorCode.not_coordinator),
    "consumer_heartbeat": lambda gid, req: HeartbeatResult(
        ErrorCode.not_coordinator, "this node does not coordinate the group"
    ),
    "describe_consumer": lambda gid: ConsumerGroupDescription(gid, ErrorCode.not_coordinator),
}


class GroupOwners(Protocol):
    """Which node coordinates each group (services/cluster.py's NodeCluster)."""

    def group_owner(self, group_id: str) -> int: ...


class GroupPeer(Protocol):
    """Another node, as far as group calls go (leader_forwarder/grpc_client.py)."""

    async def group_call(self, payload: bytes, *, timeout_s: float) -> bytes:
        """The answer's payload; raises LeaderUnavailable (leader_forwarder/api.py),
        `unreachable` set when the node could not be reached at all."""
        ...


class RoutedGroups:
    """The `Groups` service: each call served by the node that coordinates its group."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        node_id: int,
        owners: GroupOwners,
        peer: Callable[[int], GroupPeer | None],
        clock: Clock,
        *,
        owner_wait_s: float,
    ) -> None:
        self._coord = coordinator
        # The calls this node serves for the groups it owns, by name.
        self._local: dict[str, Callable[..., Awaitable[Any]]] = {
            "join": coordinator.join,
            "sync": coordinator.sync,
            "heartbeat": coordinator.heartbeat,
            "leave": coordinator.leave,
            "commit_offsets": coordinator.commit_offsets,
            "txn_commit_offsets": coordinator.txn_commit_offsets,
            "fetch_offsets": coordinator.fetch_offsets,
            "delete_offsets": coordinator.delete_offsets,
            "delete_group": coordinator.delete_group,
            "describe_classic": coordinator.describe_classic,
            "consumer_heartbeat": functools.partial(consumer_service.heartbeat, coordinator),
            "describe_consumer": functools.partial(consumer_service.describe, coordinator),
        }
        self._me = node_id
        self._owners = owners
        # The link to another node by id, None for a node not in the membership.
        self._peer = peer
        self._clock = clock
        self._owner_wait_s = owner_wait_s

    async def _route(self, method: str, group_id: str, *args: Any, **kwargs: Any) -> Any:
        """The call served here if this node owns the group, else by the owner."""
        timeout_s = kwargs.pop("_timeout_s", 30.0)
        if not group_id:
            return await self._local[method](group_id, *args, **kwargs)
        payload: bytes | None = None  # encoded once, and only if the call is passed on
        # A dead owner leaves the live set within its lease; then the group has a new one.
        deadline = self._clock.monotonic() + self._owner_wait_s
        unreachable: int | None = None
        delay = 0.05
        while True:
            owner = self._owners.group_owner(group_id)
            if owner == self._me:
                return await self._local[method](group_id, *args, **kwargs)
            peer = self._peer(owner) if owner != unreachable else None
            if peer is not None:
                if payload is None:
                    payload = group_wire.encode_call(method, (group_id, *args), kwargs)
                try:
                    answer = await peer.group_call(payload, timeout_s=timeout_s)
                    return group_wire.decode_result(answer)
                except LeaderUnavailable as exc:
                    if not exc.unreachable:
                        # Reached and slow or failing: no other owner is coming.
                        log.info("group %r: coordinator node %d: %s", group_id, owner, exc)
                        return _NOT_COORDINATOR[method](group_id, *args, **kwargs)
                    # Not retried on the same node: the call may have reached it.
                    unreachable = owner
            if self._clock.monotonic() >= deadline:
                log.info("group %r: coordinator node %d is not reachable", group_id, owner)
                return _NOT_COORDINATOR[method](group_id, *args, **kwargs)
            await self._clock.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def serve(self, payload: bytes) -> bytes:
        """Serves a group call another node passed on; NOT_COORDINATOR for a group this
        node does not own. Raises group_wire.BadPayload for anything else."""
        method, args, kwargs = group_wire.decode_call(payload)
        if method not in _NOT_COORDINATOR or not args or not isinstance(args[0], str):
            raise group_wire.BadPayload(f"no group call {method!r}")
        if self._owners.group_owner(args[0]) != self._me:
            result = _NOT_COORDINATOR[method](*args, **kwargs)
        else:
            result = await self._local[method](*args, **kwargs)
        return group_wire.encode_result(result)

    # -- the Groups protocol ----------------------------------------------------
    async def join(self, group_id: str, req: JoinRequest) -> JoinResult:
        # The answer may wait a whole rebalance.
        wait_s = req.rebalance_timeout_ms / 1000 + 30
        result: JoinResult = await self._route("join", group_id, req, _timeout_s=wait_s)
        return result

    async def sync(self, group_id: str, **kwargs: Any) -> SyncResult:
        # A follower's SyncGroup waits for the leader's, at most a rebalance timeout.
        result: SyncResult = await self._route("sync", group_id, **kwargs, _timeout_s=900)
        return result

    async def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        result: ErrorCode = await self._route(
            "heartbeat", group_id, member_id, instance_id, generation
        )
        return result

    async def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        error, errors = await self._route("leave", group_id, tuple(members))
        return error, list(errors)

    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: Sequence[OffsetToCommit],
    ) -> list[ErrorCode]:
        result: list[ErrorCode] = await self._route(
            "commit_offsets", group_id, generation, member_id, instance_id, list(offsets)
        )
        return result

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
        """TxnOffsetCommit, at the group's coordinator: offsets pending in the producer's
        transaction until its marker commits them."""
        result: list[ErrorCode] = await self._route(
            "txn_commit_offsets",
            group_id,
            producer_id,
            offsets_partition,
            generation,
            member_id,
            instance_id,
            list(offsets),
        )
        return result

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[CommittedOffset]]:
        wanted = None if partitions is None else list(partitions)
        error, offsets = await self._route(
            "fetch_offsets", group_id, wanted, member_id, member_epoch
        )
        return error, list(offsets)

    async def pending_offsets(self, group_id: str) -> list[tuple[str, int]]:
        # Read from the metadata store, which every node shares: the coordinator's memory
        # holds none of it (the transaction's marker moves the rows, on another node).
        return await self._coord.pending.pending_offsets(group_id)

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        error, errors = await self._route("delete_offsets", group_id, list(partitions))
        return error, list(errors)

    async def delete_group(self, group_id: str) -> ErrorCode:
        result: ErrorCode = await self._route("delete_group", group_id)
        return result

    async def describe_classic(self, group_id: str) -> ClassicGroupDescription:
        result: ClassicGroupDescription = await self._route("describe_classic", group_id)
        return result

    async def consumer_heartbeat(self, group_id: str, req: HeartbeatRequest) -> HeartbeatResult:
        result: HeartbeatResult = await self._route("consumer_heartbeat", group_id, req)
        return result

    async def describe_consumer(self, group_id: str) -> ConsumerGroupDescription:
        result: ConsumerGroupDescription = await self._route("describe_consumer", group_id)
        return result

    async def list_groups(self) -> list[GroupSummary]:
        return await self._coord.list_groups()
