"""Transaction-coordinator calls served by the node that owns the id's shard, wherever the
client (or the partition leader asking for verification) is connected.

`RoutedTxns` is what handlers and leaders call. A call about a transactional id whose
shard this node owns is served by its `TxnCoordinator` (txn_coordinator/role.py); one
whose shard another node owns goes to that node as a `TxnCall` (the method and its
arguments as tagged JSON, services/group_wire.py's scheme with this module's types),
and the owner's coordinator serves it. Only transaction metadata crosses zones.

As for groups (services/groups.py): when the owner cannot be reached (it died), the call
waits up to a lease and a bit for the membership to name another owner; an owner reached
but failing, or none in reach, answers NOT_COORDINATOR in the call's own shape, and the
client looks the coordinator up again (Kafka's producers do so on NOT_COORDINATOR).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.runtime.clock import Clock
from zonegate.services import group_wire
from zonegate.transactions.coordinator_core import TxnDescription, TxnListing
from zonegate.transactions.decisions import Answer
from zonegate.transactions.metadata import TopicPartition
from zonegate.transactions.states import TransactionVersion
from zonegate.txn_coordinator.role import TxnCoordinator

log = logging.getLogger(__name__)
E = ErrorCode

# The only dataclasses a transaction call or answer may carry.
TYPES: dict[str, type[Any]] = {t.__name__: t for t in (Answer, TxnDescription, TxnListing)}


def _parts(partitions: Iterable[Any]) -> list[TopicPartition]:
    return [(str(t), int(p)) for t, p in partitions]


# What each call answers when no coordinator can serve it, in the call's own shape.
_NOT_COORDINATOR: dict[str, Callable[..., Any]] = {
    "init_producer_id": lambda *a: Answer(E.not_coordinator),
    "add_partitions": lambda *a: Answer(E.not_coordinator),
    "end_txn": lambda *a: Answer(E.not_coordinator),
    "verify_partitions": lambda tid, pid, epoch, parts: dict.fromkeys(
        _parts(parts), E.not_coordinator
    ),
    "describe": lambda tid: TxnDescription(tid, E.not_coordinator),
}


# How many arguments each call takes (the transactional id first, but for the listing).
_ARITY = {
    "init_producer_id": 3,
    "add_partitions": 5,
    "end_txn": 5,
    "verify_partitions": 4,
    "describe": 1,
    "list_transactions": 4,
}


class ShardOwners(Protocol):
    """Which node owns each transaction shard (services/cluster.py's NodeCluster)."""

    def txn_shard_owner(self, shard: int) -> int: ...


class TxnPeer(Protocol):
    """Another node, as far as transaction calls go (leader_forwarder/grpc_client.py)."""

    async def txn_call(self, payload: bytes, *, timeout_s: float) -> bytes:
        """The answer's payload; raises LeaderUnavailable, `unreachable` set when the node
        could not be reached at all."""
        ...


class RoutedTxns:
    """The `Transactions` service: each call served by the owner of its id's shard."""

    def __init__(
        self,
        coordinator: TxnCoordinator,
        node_id: int,
        owners: ShardOwners,
        peer: Callable[[int], TxnPeer | None],
        clock: Clock,
        *,
        owner_wait_s: float,
        call_timeout_s: float = 30.0,
    ) -> None:
        self.coordinator = coordinator
        self._me = node_id
        self._owners = owners
        self._peer = peer  # the link to another node by id, None for a node not known
        self._clock = clock
        self._owner_wait_s = owner_wait_s
        self._timeout_s = call_timeout_s

    def shard_of(self, transactional_id: str) -> int:
        return self.coordinator.shard_of(transactional_id)

    _shard = shard_of

    async def _local(self, method: str, args: Sequence[Any]) -> Any:
        """The call served by this node's coordinator (which answers NOT_COORDINATOR
        itself for a shard it has not taken over yet, or lost)."""
        c = self.coordinator
        if method == "init_producer_id":
            tid, timeout_ms, expected = args
            return await c.init_producer_id(
                tid, int(timeout_ms), None if expected is None else tuple(expected)
            )
        if method == "add_partitions":
            tid, pid, epoch, parts, version = args
            return await c.add_partitions(
                tid, pid, epoch, frozenset(_parts(parts)), TransactionVersion(version)
            )
        if method == "verify_partitions":
            tid, pid, epoch, parts = args
            return await c.verify_partitions(tid, pid, epoch, _parts(parts))
        if method == "end_txn":
            tid, pid, epoch, commit, version = args
            return await c.end_txn(tid, pid, epoch, bool(commit), TransactionVersion(version))
        if method == "describe":
            return c.describe(args[0])
        if method == "list_transactions":
            shards, pids, states, min_duration_ms = args
            return c.list_shards([int(x) for x in shards], pids, states, int(min_duration_ms))
        raise group_wire.BadPayload(f"no transaction call {method!r}")

    async def _route(self, method: str, transactional_id: str, *args: Any) -> Any:
        """The call served here if this node owns the id's shard, else by the owner."""
        call = (transactional_id, *args)
        shard = self._shard(transactional_id)
        payload: bytes | None = None
        deadline = self._clock.monotonic() + self._owner_wait_s
        unreachable: int | None = None
        delay = 0.05
        while True:
            owner = self._owners.txn_shard_owner(shard)
            if owner == self._me:
                return await self._local(method, call)
            peer = self._peer(owner) if owner != unreachable else None
            if peer is not None:
                if payload is None:
                    payload = group_wire.encode_call(method, call, {}, TYPES)
                try:
                    answer = await peer.txn_call(payload, timeout_s=self._timeout_s)
                    return group_wire.decode_result(answer, TYPES)
                except LeaderUnavailable as exc:
                    if not exc.unreachable:
                        log.info("transaction shard %d: coordinator node %d: %s", shard, owner, exc)
                        return _NOT_COORDINATOR[method](*call)
                    unreachable = owner  # not retried there: the call may have reached it
            if self._clock.monotonic() >= deadline:
                log.info("transaction shard %d: coordinator node %d unreachable", shard, owner)
                return _NOT_COORDINATOR[method](*call)
            await self._clock.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def serve(self, payload: bytes) -> bytes:
        """Serves a transaction call another node passed on; NOT_COORDINATOR for a shard
        this node does not own. Raises group_wire.BadPayload for anything else."""
        method, args, kwargs = group_wire.decode_call(payload, TYPES)
        if kwargs or len(args) != _ARITY.get(method):
            raise group_wire.BadPayload(f"no transaction call {method!r} of {len(args)} arguments")
        try:
            if method == "list_transactions":
                result = await self._local(method, args)
            elif not isinstance(args[0], str | None):
                raise group_wire.BadPayload(f"transaction call {method!r} without an id")
            elif (
                args[0] is not None
                and self._owners.txn_shard_owner(self._shard(args[0])) != self._me
            ):
                result = _NOT_COORDINATOR[method](*args)
            else:
                result = await self._local(method, args)
        except (TypeError, ValueError) as exc:  # wrong arity or shapes: no node sends it
            raise group_wire.BadPayload(f"transaction call {method!r}: {exc}") from None
        return group_wire.encode_result(result, TYPES)

    # -- the Transactions service ------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str | None, timeout_ms: int, expected: tuple[int, int] | None
    ) -> Answer:
        """InitProducerId; with no transactional id (an idempotent producer) served here."""
        if transactional_id is None:
            return await self.coordinator.init_producer_id(None, timeout_ms, expected)
        result: Answer = await self._route(
            "init_producer_id", transactional_id, timeout_ms, expected
        )
        return result

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        client_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Answer:
        result: Answer = await self._route(
            "add_partitions",
            transactional_id,
            producer_id,
            producer_epoch,
            frozenset(partitions),
            int(client_version),
        )
        return result

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        result: dict[TopicPartition, ErrorCode] = await self._route(
            "verify_partitions", transactional_id, producer_id, producer_epoch, list(partitions)
        )
        return result

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_version: TransactionVersion,
    ) -> Answer:
        result: Answer = await self._route(
            "end_txn", transactional_id, producer_id, producer_epoch, commit, int(client_version)
        )
        return result

    async def describe(self, transactional_id: str) -> TxnDescription:
        result: TxnDescription = await self._route("describe", transactional_id)
        return result

    async def list_transactions(
        self,
        shards: Iterable[int],
        producer_ids: Iterable[int],
        state_names: Iterable[str],
        min_duration_ms: int,
    ) -> tuple[ErrorCode, list[TxnListing], list[str]]:
        """ListTransactions over `shards` (those FindCoordinator sends this node's clients
        to), asked of each shard's owner: the first error met (COORDINATOR_LOAD_IN_PROGRESS
        for a shard being moved, NOT_COORDINATOR for an owner out of reach), the listings,
        and the state names no transaction state has."""
        pids, names = list(producer_ids), list(state_names)
        by_owner: dict[int, list[int]] = {}
        for shard in shards:
            by_owner.setdefault(self._owners.txn_shard_owner(shard), []).append(shard)
        error, listed = E.none, []
        unknown = self.coordinator.unknown_states(names)
        for owner, owned in sorted(by_owner.items()):
            call = (owned, pids, names, min_duration_ms)
            if owner == self._me:
                answer = await self._local("list_transactions", call)
            else:
                answer = await self._ask(owner, call)
            err, found = answer
            listed += found
            if error == E.none:
                error = err
        return error, sorted(listed, key=lambda t: t.transactional_id), unknown

    async def _ask(self, owner: int, call: tuple[Any, ...]) -> tuple[ErrorCode, list[TxnListing]]:
        peer = self._peer(owner)
        if peer is None:
            return E.not_coordinator, []
        payload = group_wire.encode_call("list_transactions", call, {}, TYPES)
        try:
            answer = await peer.txn_call(payload, timeout_s=self._timeout_s)
        except LeaderUnavailable as exc:
            log.info("transaction listing: coordinator node %d: %s", owner, exc)
            return E.not_coordinator, []
        err, found = group_wire.decode_result(answer, TYPES)
        return err, list(found)
