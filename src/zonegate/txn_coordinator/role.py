"""The transaction coordinator of one node: which shards it owns, their requests, one timer.

Transactional ids hash into shards (Kafka's `partitionFor`, `transactions/states.py`).
A shard's owner is decided by the injected `shard_owner` (rendezvous hashing over the
live nodes, as groups are owned); a node that finds itself the owner takes the shard
over by compare-and-set on its coordinator epoch in the metadata store, loads its ids
and finishes what its predecessor left (`ShardHost.loaded`). A node asked about a shard
it does not hold answers NOT_COORDINATOR, and the client looks the coordinator up again.
One task sleeps on the injected clock until the earliest transaction timeout of all
hosted shards (bounded by the abort interval), then aborts what timed out; ids idle past
`transactional.id.expiration.ms` are forgotten every expiry interval. Idempotent
producers' ids (InitProducerId with no transactional id) come from this node's block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.metastore.api import PendingOffsetStore, ProducerIds, TransactionStore
from zonegate.metastore.models import MetaStoreError, ShardFenced, ShardOwner
from zonegate.runtime.clock import Clock, wait_event
from zonegate.transactions.coordinator_core import (
    CoordinatorConfig,
    TransactionShard,
    TxnDescription,
    TxnListing,
)
from zonegate.transactions.decisions import Answer, ProducerIdsUnavailable, Write
from zonegate.transactions.metadata import TopicPartition
from zonegate.transactions.states import TransactionVersion, TxnState, shard_for
from zonegate.txn_coordinator.producer_ids import ProducerIdBlocks
from zonegate.txn_coordinator.shard_host import MarkerWriter, ShardHost

log = logging.getLogger(__name__)
E = ErrorCode
# How long an add waits for the producer's previous transaction's markers before it is
# answered CONCURRENT_TRANSACTIONS (add_partitions).
CONCURRENT_WAIT_S = 0.1


_OPEN = frozenset(
    {
        TxnState.ONGOING,
        TxnState.PREPARE_COMMIT,
        TxnState.PREPARE_ABORT,
        TxnState.PREPARE_EPOCH_FENCE,
    }
)


class TxnMetaStore(TransactionStore, PendingOffsetStore, ProducerIds, Protocol):
    """What the role needs of the metadata store."""


@dataclass(frozen=True, slots=True)
class TxnCoordinatorConfig:
    shards: int = 50  # transaction.state.log.num.partitions
    core: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    abort_interval_ms: int = 10000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    expire_interval_ms: int = 3600000  # transaction.remove.expired.transaction.cleanup.interval.ms
    retry_backoff_s: float = 0.1  # between marker attempts at a partition that refused


class TxnCoordinator:
    def __init__(
        self,
        node_id: int,
        incarnation: int,
        store: TxnMetaStore,
        markers: MarkerWriter,
        shard_owner: Callable[[int], int],
        clock: Clock,
        config: TxnCoordinatorConfig = TxnCoordinatorConfig(),
    ) -> None:
        self.node_id = node_id
        self._incarnation = incarnation
        self._store = store
        self._markers = markers
        self._shard_owner = shard_owner
        self._clock = clock
        self.config = config
        self.hosts: dict[int, ShardHost] = {}
        self.producer_ids = ProducerIdBlocks(store.allocate_producer_ids)
        self._wake = asyncio.Event()
        self._rebalancing = asyncio.Lock()  # one takeover pass at a time
        self._closing: set[asyncio.Task[None]] = set()  # hosts lost, being closed
        self._timer: asyncio.Task[None] | None = None
        self._last_expiry_ms = clock.wall_ms()
        self.sweeps = 0  # how many times the timer has run (for tests and metrics)
        self._asleep = False

    # -- life ----------------------------------------------------------------------------

    async def start(self, *, take_shards: bool = True) -> None:
        """Fetches a block of producer ids and starts the timer; with `take_shards`, takes
        over this node's shards first (a node defers that to its periodic `rebalance`,
        so that its start does not wait on a store write per shard)."""
        await self.producer_ids.ready()
        if take_shards:
            await self.rebalance()
        self._timer = asyncio.get_running_loop().create_task(self._run_timer())

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
        for shard in list(self.hosts):
            await self._drop(shard)
        await asyncio.gather(*list(self._closing), return_exceptions=True)
        await self.producer_ids.close()

    # -- ownership -----------------------------------------------------------------------

    def shard_of(self, transactional_id: str) -> int:
        return shard_for(transactional_id, self.config.shards)

    async def rebalance(self) -> None:
        """Takes over the shards this node should own now and lets go of the others
        (called at start and whenever the live nodes change; a shard another node took
        meanwhile is left to the next call)."""
        async with self._rebalancing:
            await self._rebalance()

    async def _rebalance(self) -> None:
        wanted = {s for s in range(self.config.shards) if self._shard_owner(s) == self.node_id}
        for shard in [s for s in self.hosts if s not in wanted]:
            await self._drop(shard)
        try:
            seen = {o.shard: o for o in await self._store.txn_shards()}
        except MetaStoreError:
            log.warning("transaction shards unreadable; taken over later", exc_info=True)
            return
        # A shard another node took over since this one did (the live nodes changed and
        # changed back, as while nodes join) is held here at a stale epoch: until a write
        # of it were fenced, it would answer from what it loaded then. Given up, and taken
        # over again below at the next epoch, with what the other node wrote.
        for host in list(self.hosts.values()):
            found = seen.get(host.shard)
            if found is not None and found.epoch != host.epoch:
                host.deposed()
        missing = sorted(wanted - self.hosts.keys())
        for shard in missing:
            await self._take(shard, seen.get(shard))

    async def _take(self, shard: int, seen: ShardOwner | None) -> None:
        try:
            epoch = await self._store.take_shard(
                shard, self.node_id, self._incarnation, 0 if seen is None else seen.epoch
            )
            txns = await self._store.load_shard(shard)
        except ShardFenced:
            return  # another node took it since it was read: the next rebalance decides
        except MetaStoreError:
            log.warning("transaction shard %d not taken over", shard, exc_info=True)
            return
        core = TransactionShard(epoch, self.config.core, self.producer_ids.next_producer_id, txns)
        host = ShardHost(
            core,
            shard,
            epoch,
            self._store,
            self._store,
            self._markers,
            self._clock,
            self.config.retry_backoff_s,
            on_lost=self._lost,
        )
        self.hosts[shard] = host
        log.info("transaction shard %d taken over at epoch %d (%d ids)", shard, epoch, len(txns))
        host.loaded()
        self._wake.set()

    def _lost(self, host: ShardHost) -> None:
        if self.hosts.get(host.shard) is host:
            del self.hosts[host.shard]
        # Held until done: the loop keeps only a weak reference to a task.
        task = asyncio.get_running_loop().create_task(host.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _drop(self, shard: int) -> None:
        host = self.hosts.pop(shard, None)
        if host is not None:
            log.info("transaction shard %d let go at epoch %d", shard, host.epoch)
            await host.close()

    def _host(self, transactional_id: str | None) -> ShardHost | None:
        host = self.hosts.get(self.shard_of(transactional_id or ""))
        return None if host is None or host.lost else host

    # -- requests ------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str | None, timeout_ms: int, expected: tuple[int, int] | None
    ) -> Answer:
        if transactional_id is None:  # an idempotent producer: any node answers
            try:
                return Answer(E.none, self.producer_ids.next_producer_id(), 0)
            except ProducerIdsUnavailable:
                return Answer(E.coordinator_load_in_progress)
        host = self._host(transactional_id)
        if host is None:
            return Answer(E.not_coordinator)
        answer = await host.decide(
            lambda core, now: core.init_producer_id(transactional_id, timeout_ms, expected, now)
        )
        self._wake.set()
        return answer

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
        client_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Answer:
        """AddPartitionsToTxn, AddOffsetsToTxn (the group's offsets partition), and under
        TV2 the leader's add on the producer's behalf."""
        host = self._host(transactional_id)
        if host is None:
            return Answer(E.not_coordinator)

        def ask(core: TransactionShard, now: int) -> Answer | Write:
            return core.add_partitions(
                transactional_id, producer_id, producer_epoch, partitions, now, client_version
            )

        answer = await host.decide(ask)
        # The producer's last transaction is still writing its markers (a client starts
        # the next one as soon as EndTxn answers): wait for them here, up to
        # CONCURRENT_WAIT_S, rather than answer CONCURRENT_TRANSACTIONS at once and have
        # the client back off and ask again (librdkafka and Kafka's producer wait 20 ms).
        # Kafka's broker does the same for its own adds under TV2 (retried up to
        # add.partitions.to.txn.retry.backoff.max.ms, 100 ms).
        if answer.error == E.concurrent_transactions and await host.markers_done(
            transactional_id, CONCURRENT_WAIT_S
        ):
            answer = await host.decide(ask)
        self._wake.set()  # a transaction may have started: its timeout may come first
        return answer

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1's question from a partition's leader. A yes is given only while
        the shard's epoch is still this host's: a node deposed without knowing it yet
        (its successor took the shard and may have ended the transaction) must not let
        a batch open a transaction its successor already closed (a hanging one)."""
        parts = list(partitions)
        host = self._host(transactional_id)
        if host is None:
            return dict.fromkeys(parts, E.not_coordinator)
        answer = host.core.verify_partitions(transactional_id, producer_id, producer_epoch, parts)
        if E.none in answer.values():
            try:
                current = await self._store.shard_epoch(host.shard)
            except Exception:
                log.warning("transaction shard %d: epoch unreadable", host.shard, exc_info=True)
                return dict.fromkeys(parts, E.coordinator_not_available)
            if current != host.epoch:
                host.deposed()
                return dict.fromkeys(parts, E.not_coordinator)
        return answer

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_version: TransactionVersion,
    ) -> Answer:
        host = self._host(transactional_id)
        if host is None:
            return Answer(E.not_coordinator)
        return await host.decide(
            lambda core, now: core.end_txn(
                transactional_id, producer_id, producer_epoch, commit, client_version, now
            )
        )

    def describe(self, transactional_id: str) -> TxnDescription:
        host = self._host(transactional_id)
        if host is None:
            return TxnDescription(transactional_id, E.not_coordinator)
        return host.core.describe(transactional_id)

    def list_transactions(
        self, producer_ids: Iterable[int], state_names: Iterable[str], min_duration_ms: int
    ) -> tuple[list[TxnListing], list[str]]:
        """ListTransactions over the shards this node holds."""
        pids, names, now = list(producer_ids), list(state_names), self._clock.wall_ms()
        listed: list[TxnListing] = []
        unknown: list[str] = []
        for host in list(self.hosts.values()):
            found, unknown = host.core.list_transactions(pids, names, min_duration_ms, now)
            listed += found
        if not self.hosts:
            unknown = [n for n in names if TxnState.from_kafka_name(n) is None]
        return sorted(listed, key=lambda t: t.transactional_id), unknown

    def list_shards(
        self,
        shards: Iterable[int],
        producer_ids: Iterable[int],
        state_names: Iterable[str],
        min_duration_ms: int,
    ) -> tuple[ErrorCode, list[TxnListing]]:
        """ListTransactions over the given shards, for the node whose clients are sent to
        them (services/txn_routing.py): COORDINATOR_LOAD_IN_PROGRESS, with what the other
        shards hold, while one of them is not held here yet (Kafka answers so while it
        loads a partition)."""
        pids, names, now = list(producer_ids), list(state_names), self._clock.wall_ms()
        error, listed = E.none, []
        for shard in shards:
            host = self.hosts.get(shard)
            if host is None or host.lost:
                error = E.coordinator_load_in_progress
                continue
            listed += host.core.list_transactions(pids, names, min_duration_ms, now)[0]
        return error, listed

    def open_transactions(self) -> tuple[int, int | None]:
        """How many transactions of the shards held are open (Ongoing or ending), and the
        start time of the oldest (metrics: a transaction that never ends shows here)."""
        count, oldest = 0, None
        for host in list(self.hosts.values()):
            for meta in host.core.txns.values():
                if meta.state in _OPEN:
                    count += 1
                    if meta.txn_start_ms >= 0 and (oldest is None or meta.txn_start_ms < oldest):
                        oldest = meta.txn_start_ms
        return count, oldest

    @staticmethod
    def unknown_states(state_names: Iterable[str]) -> list[str]:
        """The state filters no transaction state has (`unknown_state_filters`)."""
        return [n for n in state_names if TxnState.from_kafka_name(n) is None]

    # -- the timer -----------------------------------------------------------------------

    async def _run_timer(self) -> None:
        while True:
            self._asleep = True
            try:
                await wait_event(self._clock, self._wake, self._next_sweep_s())
            finally:
                self._asleep = False
            self._wake.clear()
            await self.sweep()

    @property
    def timer_idle(self) -> bool:
        """The timer sleeps until its next deadline with nothing to wake it before: a test
        that moves the clock now knows the next sweep comes after the move."""
        return self._asleep and not self._wake.is_set()

    def _next_sweep_s(self) -> float:
        now = self._clock.wall_ms()
        wait_ms = self.config.abort_interval_ms
        for host in self.hosts.values():
            deadline = host.core.next_deadline_ms()
            if deadline is not None:
                # The core aborts a transaction once it is strictly past its deadline.
                wait_ms = min(wait_ms, deadline + 1 - now)
        return max(wait_ms, 0) / 1000

    async def sweep(self) -> None:
        """Aborts the timed-out transactions of every shard held; forgets expired ids once
        an expiry interval has passed since the last time."""
        now = self._clock.wall_ms()
        expire = now - self._last_expiry_ms >= self.config.expire_interval_ms
        if expire:
            self._last_expiry_ms = now
        for host in list(self.hosts.values()):
            try:
                await host.sweep(expire)
            except Exception:
                log.exception("transaction shard %d: timeouts not handled", host.shard)
        self.sweeps += 1

    async def settled(self) -> None:
        """Waits until no host has markers, retries or completions in flight."""
        for host in list(self.hosts.values()):
            await host.settled()
