"""One transaction shard on the node that owns it at one coordinator epoch: the pure core
(`TransactionShard`) with its writes made durable, fenced by the epoch, and its markers sent.

Each request is decided by the core; a `Write` is written to the metadata store
(`write_txn`, fenced by the shard's epoch) before `written` answers, as Kafka appends to
`__transaction_state` before answering. A write refused as fenced means another node
took the shard over: the host is lost (every later call answers NOT_COORDINATOR) and
the role drops it. An ending transaction's markers go through the injected
`MarkerWriter` (the partitions' leaders, through the write path) and the offsets of its
groups through `complete_txn_offsets`, retried on the clock until each partition answered
or the shard is lost; then the completion is written. This is the simulation's
coordinator (tests/transactions/simulation.py), event for event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from zonegate.metastore.api import PendingOffsetStore, TransactionStore
from zonegate.metastore.models import ShardFenced
from zonegate.runtime.clock import Clock
from zonegate.transactions.coordinator_core import TransactionShard
from zonegate.transactions.decisions import After, Answer, Markers, Write
from zonegate.transactions.marker_progress import MarkerOutcome, MarkerProgress
from zonegate.transactions.metadata import TopicPartition

log = logging.getLogger(__name__)
E = ErrorCode

OFFSETS_TOPIC = "__consumer_offsets"  # AddOffsetsToTxn adds the group's partition of it


class MarkerWriter(Protocol):
    """Writes one transaction's marker to partitions (their leaders, through the write
    path: docs/transactions.md "Markers are data")."""

    async def write_markers(
        self, markers: Markers, partitions: frozenset[TopicPartition]
    ) -> Mapping[TopicPartition, ErrorCode]:
        """Each partition's answer, Kafka's WriteTxnMarkers codes."""
        ...

    async def exists(self, partition: TopicPartition) -> bool:
        """False once the partition's topic is deleted: it needs no marker."""
        ...


class ShardHost:
    def __init__(
        self,
        core: TransactionShard,
        shard: int,
        epoch: int,
        store: TransactionStore,
        offsets: PendingOffsetStore,
        markers: MarkerWriter,
        clock: Clock,
        retry_backoff_s: float = 0.1,
        on_lost: Callable[[ShardHost], None] = lambda host: None,
    ) -> None:
        self.core = core
        self.shard = shard
        self.epoch = epoch
        self._store = store
        self._offsets = offsets
        self._markers = markers
        self._clock = clock
        self._backoff_s = retry_backoff_s
        self._on_lost = on_lost
        self.lost = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.progress: dict[str, MarkerProgress] = {}
        self._marker_tasks: dict[str, asyncio.Task[None]] = {}  # by transactional id

    # -- requests ----------------------------------------------------------------------

    async def decide(self, ask: Callable[[TransactionShard, int], Answer | Write]) -> Answer:
        """A client's request: the core's answer now, or its write made durable first."""
        if self.lost:
            return Answer(E.not_coordinator)
        d = ask(self.core, self._clock.wall_ms())
        if isinstance(d, Answer):
            return d
        answer = await self.persist(d)
        assert answer is not None, d  # client requests always have someone to answer
        return answer

    async def persist(self, w: Write) -> Answer | None:
        """Makes `w` durable under the shard's epoch, then applies it; what to answer
        (None: nobody waits, as for a timeout's abort or a completion)."""
        try:
            if w.after == After.EXPIRE:
                await self._store.delete_txn(self.shard, self.epoch, w.transactional_id)
            else:
                await self._store.write_txn(self.shard, self.epoch, w.transactional_id, w.transit)
        except ShardFenced:
            answer = self.core.write_failed(w, E.not_coordinator)
            self._lose()
            return answer
        except Exception:
            # The store out of reach, or anything else (a SQLite file locked past its busy
            # timeout): the move is not applied here, whether or not it landed. That is
            # safe: only this owner writes the shard at this epoch, so its next write
            # overrides what landed, and a successor loads either. What must never
            # happen is a pending move left set, which would refuse the id for ever.
            log.warning("transaction shard %d: write of %s failed", self.shard, w, exc_info=True)
            answer = self.core.write_failed(w, E.coordinator_not_available)
            if w.after == After.COMPLETE:
                self._spawn(self._complete_again(w.transactional_id))
            return answer
        if self.lost:  # written before the takeover, which reloads it; no one acts on it here
            return Answer(E.not_coordinator)
        out = self.core.written(w, self._clock.wall_ms())
        if out.markers is not None:
            self.start_markers(out.markers)
        return out.answer

    # -- markers -----------------------------------------------------------------------

    def loaded(self) -> None:
        """After the takeover: the markers the predecessor left unfinished, written again."""
        for m in self.core.loaded(self._clock.wall_ms()):
            self.start_markers(m)

    def start_markers(self, m: Markers) -> None:
        progress = MarkerProgress(m)
        self.progress[m.transactional_id] = progress
        self._marker_tasks[m.transactional_id] = self._spawn(self._send_markers(progress))

    async def markers_done(self, transactional_id: str, within_s: float) -> bool:
        """Waits up to `within_s` (on the clock) for the id's markers in flight and their
        completion; whether there were any and they are done now."""
        task = self._marker_tasks.get(transactional_id)
        if task is None or task.done():
            return False
        timer = asyncio.ensure_future(self._clock.sleep(within_s))
        try:
            await asyncio.wait([task, timer], return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        return task.done()

    async def _send_markers(self, progress: MarkerProgress) -> None:
        m = progress.markers
        while not self.lost and self.progress.get(m.transactional_id) is progress:
            if progress.complete:
                del self.progress[m.transactional_id]
                await self.persist(m.complete)
                return
            waiting = frozenset(progress.to_send)
            if not waiting:  # stopped: a newer producer or coordinator owns it
                del self.progress[m.transactional_id]
                return
            try:
                retry = await self._round(progress, waiting)
            except Exception:  # whatever failed, the markers are owed: tried again
                log.warning("markers of %s failed", m.transactional_id, exc_info=True)
                retry = True
            if retry:
                await self._clock.sleep(self._backoff_s)

    async def _round(self, progress: MarkerProgress, waiting: frozenset[TopicPartition]) -> bool:
        """One attempt at the partitions still waiting; True when some are to be retried."""
        m = progress.markers
        retry = False
        for tp, error in (await self._write(m, waiting)).items():
            if error == E.unknown_topic_or_partition and not await self._markers.exists(tp):
                progress.gone(tp)
                self.core.markers_partition_gone(m.transactional_id, tp)
                continue
            retry |= progress.answered(tp, error) == MarkerOutcome.RETRY
        return retry

    async def _write(
        self, m: Markers, partitions: frozenset[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Markers to data partitions; the group offsets of `__consumer_offsets` ones
        completed in the store (the marker of the offsets partition, in Kafka)."""
        out: dict[TopicPartition, ErrorCode] = {}
        data = frozenset(tp for tp in partitions if tp[0] != OFFSETS_TOPIC)
        for tp in partitions - data:
            try:
                await self._offsets.complete_txn_offsets(tp[1], m.producer_id, m.commit)
                out[tp] = E.none
            except Exception:
                log.warning("group offsets of %s not completed", m.transactional_id, exc_info=True)
                out[tp] = E.kafka_storage_error  # retried
        if data:
            try:
                out.update(await self._markers.write_markers(m, data))
            except Exception:  # the write path failed as a whole: every partition retried
                log.warning("transaction markers for %s failed", m.transactional_id, exc_info=True)
                out.update(dict.fromkeys(data, E.request_timed_out))
        return out

    async def _complete_again(self, transactional_id: str) -> None:
        await self._clock.sleep(self._backoff_s)
        again = self.core.complete_again(transactional_id, self._clock.wall_ms())
        if again is not None and not self.lost:
            await self.persist(again)

    # -- time --------------------------------------------------------------------------

    async def sweep(self, expire: bool) -> None:
        """Aborts what timed out and, with `expire`, forgets ids idle past their expiry
        (the role's timer calls it)."""
        now = self._clock.wall_ms()
        writes = self.core.abort_timed_out(now)
        if expire:
            writes += self.core.expire_ids(now)
        for w in writes:
            if self.lost:
                return
            await self.persist(w)

    # -- life --------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        for tid in [t for t, k in self._marker_tasks.items() if k is task]:
            del self._marker_tasks[tid]
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction shard %d", self.shard, exc_info=task.exception())

    def deposed(self) -> None:
        """The shard's epoch moved on without a write of this host telling it."""
        self._lose()

    def _lose(self) -> None:
        if not self.lost:
            self.lost = True
            log.info("transaction shard %d lost at epoch %d", self.shard, self.epoch)
            self._on_lost(self)

    async def settled(self) -> None:
        """Waits until no marker, retry or completion of this host is in flight."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        self.lost = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
