"""Finds each partition's leader (this node or another) and forwards to it.

Appends go through one ordered pipeline per leader node (this node's own
leader included): everything queued for a pipeline while its previous cycle was
in flight goes out as one cycle, one Append per leader node (so one sealed WAL
object costs one RPC per leader). Pipelines to different leaders run
independently, so a slow leader (its metadata-store link slow, say) holds only
the appends of the partitions it leads: with one pipeline per node, every
partition forwarded by the node waited for the slowest leader of each cycle.
`append` splits its batches by pipeline, waits for all of them and answers in
the caller's order.

A pipeline finishes a cycle, retries included, before its next starts, and a
partition's batches reach its leader in the order the producer sent them even
when the leader moves: batches whose leader answers NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH, or cannot be reached, are re-resolved against a refreshed
catalog and sent to the new leader with its epoch, which de-duplicates
idempotent producers' retries. Across pipelines the order holds by routing:
while a partition has batches not yet answered, its new batches join the same
pipeline, whatever the catalog now says, so all its unanswered batches are in
one FIFO. Only when a pipeline starts a cycle (nothing of it in flight, so each
partition's unanswered batches are all in its queue) are the queued batches of
partitions that moved handed, in order, to their new leader's pipeline: a
partition moved off a slow leader does not stay behind it under steady load.
The keys are labels only: whichever pipeline a batch is in, `_send` sends it to
the leader the catalog names at the time. A pipeline whose queue is empty ends
and is dropped; the next append to its leader starts a new one.

A call to another node that goes unanswered is given up as soon as the catalog
says none of its partitions is led there any more (checked every
`_MOVED_CHECK_S`): a leader cut off from this node (a zone cut off from the
others, whose partitions the controller moved: router/reachability.py) would
otherwise hold the pipeline, or a read, until the call's deadline. Its
batches are then uncertain and go to the new leader like any unanswered call's.

An answer must not say "not written" of a batch that may have been: clients
take NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR to mean nothing was
written, and an idempotent producer may then resend it under a new producer
epoch, which no leader can recognise as a retry (librdkafka does so when a
later batch meets a sequence gap). So a batch whose fate is unknown (a call
that failed after it may have reached its leader, or a leader that raised) is
answered REQUEST_TIMED_OUT, Kafka's answer when the outcome is unknown, unless
a later attempt settled it; and one leader's failure never changes the answers
other leaders gave to the rest of the cycle, nor those of other pipelines.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from kio.schema.errors import ErrorCode

from zonegate.kafka_errors import LEADER_MOVED, OUTCOME_UNKNOWN
from zonegate.leader_forwarder.api import Leader, LeaderUnavailable
from zonegate.leader_forwarder.messages import (
    ActiveProducer,
    AppendBatch,
    AppendResult,
    ReadIndexResult,
)
from zonegate.metastore.models import PartitionInfo
from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.storage.index import IndexEntry, UnknownStream

log = logging.getLogger(__name__)
T = TypeVar("T")
_MOVED_CHECK_S = 0.25  # how often an unanswered call looks whether its partitions moved


def _unsettled(uncertain: bool) -> ErrorCode:
    """The answer for a batch no leader took: not written, unless an attempt may have
    written it (module doc)."""
    return OUTCOME_UNKNOWN if uncertain else ErrorCode.not_leader_or_follower


class _Call:
    """One `append` call: its batches, their answers as they come, and its caller."""

    __slots__ = ("batches", "fut", "left", "results")

    def __init__(
        self, batches: Sequence[AppendBatch], fut: asyncio.Future[list[AppendResult]]
    ) -> None:
        self.batches = batches
        self.fut = fut
        self.results: list[AppendResult | None] = [None] * len(batches)
        self.left = len(batches)

    def settle(self, i: int, result: AppendResult) -> None:
        if self.results[i] is not None:
            return
        self.results[i] = result
        self.left -= 1
        if self.left == 0 and not self.fut.done():  # done: the caller was cancelled
            self.fut.set_result([r for r in self.results if r is not None])


_Item = tuple[_Call, int]  # one batch of a call: the call and the batch's index in it


@dataclasses.dataclass(eq=False)
class _Pipe:
    """One leader's pipeline: the batches waiting for its next cycle, and its task."""

    key: int
    queue: list[_Item] = dataclasses.field(default_factory=list)
    task: asyncio.Task[None] | None = None


class LeaderDirectory:
    def __init__(
        self,
        node_id: int,
        local: Leader,
        partition_of: Callable[[int], PartitionInfo | None],
        remote_for: Callable[[int], Leader | None],
        refresh: Callable[[], Awaitable[object]],
        *,
        retry_for_s: float = 20.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._me = node_id
        self._clock = clock
        self._local = local
        self._partition_of = partition_of
        self._remote_for = remote_for
        self._refresh = refresh
        self._retry_for = retry_for_s
        self._pipes: dict[int, _Pipe] = {}  # by leader node id (module doc)
        # stream id -> (the pipe its unanswered batches are in, how many there are)
        self._held: dict[int, tuple[int, int]] = {}
        self.append_rpcs = 0

    def _leader(self, stream_id: int) -> tuple[Leader | None, int, int]:
        """(leader to call, its epoch, its node id) of the stream, from the catalog."""
        p = self._partition_of(stream_id)
        if p is None:
            return None, -1, -1
        if p.leader_node == self._me:
            return self._local, p.leader_epoch, p.leader_node
        return self._remote_for(p.leader_node), p.leader_epoch, p.leader_node

    async def _until_moved(self, node: int, stream_ids: set[int], call: Awaitable[T]) -> T:
        """`call`'s result, or LeaderUnavailable once none of `stream_ids` is led by
        `node` any more while it is unanswered (module doc). Calls to this node run
        as they are."""
        if node == self._me:
            return await call
        task = asyncio.ensure_future(call)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=_MOVED_CHECK_S)
                if done:
                    return task.result()
                if all(self._leader(sid)[2] != node for sid in stream_ids):
                    raise LeaderUnavailable(
                        f"leader {node}: its partitions moved while a call was unanswered"
                    )
        finally:
            task.cancel()

    # -- appends ------------------------------------------------------------
    def _leader_node(self, stream_id: int) -> int:
        p = self._partition_of(stream_id)
        return p.leader_node if p is not None else -1

    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        if not batches:
            return []
        call = _Call(batches, asyncio.get_running_loop().create_future())
        # Queued before the first await, so calls keep the order they were made in.
        routes: dict[int, list[_Item]] = defaultdict(list)
        for i, b in enumerate(batches):
            sid = b.stream_id
            key, n = self._held.get(sid) or (self._leader_node(sid), 0)
            self._held[sid] = (key, n + 1)  # sticky while unanswered (module doc)
            routes[key].append((call, i))
        for key, items in routes.items():
            self._enqueue(key, items)
        return await call.fut

    def _enqueue(self, key: int, items: list[_Item]) -> None:
        pipe = self._pipes.get(key)
        if pipe is None:
            pipe = self._pipes[key] = _Pipe(key)
            pipe.task = asyncio.get_running_loop().create_task(self._run(pipe))
        pipe.queue += items

    def _release(self, items: list[_Item]) -> None:
        """The items are answered: their partitions may follow their leader again."""
        for call, i in items:
            sid = call.batches[i].stream_id
            key, n = self._held[sid]
            if n == 1:
                del self._held[sid]
            else:
                self._held[sid] = (key, n - 1)

    def _next_cycle(self, pipe: _Pipe) -> list[_Item]:
        """The pipe's queue, less the batches of partitions now led elsewhere, which go
        on, in order, to their leader's pipe. Called with nothing of `pipe` in flight,
        so each partition's unanswered batches are all in this queue (module doc)."""
        items, pipe.queue = pipe.queue, []
        where: dict[int, int] = {}  # one catalog reading per partition for the whole move
        keep: list[_Item] = []
        moved: dict[int, list[_Item]] = defaultdict(list)
        for item in items:
            sid = item[0].batches[item[1]].stream_id
            node = where.get(sid)
            if node is None:
                node = where[sid] = self._leader_node(sid)
            if node in (pipe.key, -1):
                keep.append(item)
            else:
                moved[node].append(item)
        for node, its in moved.items():
            for call, i in its:
                sid = call.batches[i].stream_id
                self._held[sid] = (node, self._held[sid][1])
            self._enqueue(node, its)
        return keep

    async def _run(self, pipe: _Pipe) -> None:
        cycle: list[_Item] = []
        try:
            while cycle := self._next_cycle(pipe):
                flat = [call.batches[i] for call, i in cycle]
                try:
                    results = await self._send(flat)
                except Exception:
                    log.exception("append cycle failed")
                    results = [AppendResult(OUTCOME_UNKNOWN)] * len(flat)
                for (call, i), r in zip(cycle, results, strict=True):
                    call.settle(i, r)
                self._release(cycle)
                cycle = []
        finally:
            # Dropped when idle: no await between the empty queue and this.
            if self._pipes.get(pipe.key) is pipe:
                del self._pipes[pipe.key]
            # Stopped (cancelled at shutdown) with batches in flight or queued: their
            # fate is unknown to the callers.
            left = cycle + pipe.queue
            pipe.queue = []
            for call, i in left:
                call.settle(i, AppendResult(OUTCOME_UNKNOWN))
            self._release(left)

    async def _send(self, flat: list[AppendBatch]) -> list[AppendResult]:
        results: list[AppendResult | None] = [None] * len(flat)
        uncertain: set[int] = set()  # may have been written by an attempt (module doc)
        pending = list(range(len(flat)))
        deadline = self._clock.monotonic() + self._retry_for
        delay = 0.05
        while pending:
            groups: dict[int, list[int]] = defaultdict(list)
            targets: dict[int, Leader] = {}
            for i in pending:
                leader, epoch, node = self._leader(flat[i].stream_id)
                if leader is None:
                    results[i] = AppendResult(_unsettled(i in uncertain))
                    continue
                if flat[i].leader_epoch != epoch:
                    flat[i] = dataclasses.replace(flat[i], leader_epoch=epoch)
                groups[node].append(i)
                targets[node] = leader
            answers: list[list[AppendResult] | BaseException]
            if len(groups) == 1:
                # The usual case (one leader, often this node): no gather, no extra task.
                ((n, idx),) = groups.items()
                try:
                    answers = [await self._append_to(n, targets[n], [flat[i] for i in idx])]
                except Exception as exc:
                    answers = [exc]
            else:
                answers = await asyncio.gather(
                    *(
                        self._append_to(n, targets[n], [flat[i] for i in idx])
                        for n, idx in groups.items()
                    ),
                    return_exceptions=True,
                )
            self.append_rpcs += sum(1 for n in groups if n != self._me)
            retry: list[int] = []
            for (node, idx), answer in zip(groups.items(), answers, strict=True):
                if isinstance(answer, LeaderUnavailable):
                    uncertain.update(idx)
                    retry += idx
                    continue
                if isinstance(answer, BaseException):
                    log.error("append to leader %d failed", node, exc_info=answer)
                    for i in idx:
                        results[i] = AppendResult(OUTCOME_UNKNOWN)
                    continue
                for i, r in zip(idx, answer, strict=True):
                    if r.error in LEADER_MOVED:
                        retry.append(i)
                    else:
                        results[i] = r
            if not retry:
                break
            if self._clock.monotonic() >= deadline:
                for i in retry:
                    results[i] = AppendResult(_unsettled(i in uncertain))
                break
            await self._clock.sleep(delay)
            delay = min(delay * 2, 0.5)
            try:
                await self._refresh()
            except Exception as exc:  # the metadata store out of reach: retry as we are
                log.warning("catalog refresh before an append retry failed: %s", exc)
            pending = sorted(retry)
        return [
            r if r is not None else AppendResult(ErrorCode.unknown_server_error) for r in results
        ]

    async def _append_to(
        self, node: int, leader: Leader, batches: list[AppendBatch]
    ) -> list[AppendResult]:
        sids = {b.stream_id for b in batches}
        return await self._until_moved(node, sids, leader.append(batches))

    # -- reads --------------------------------------------------------------
    async def _read(self, stream_id: int, call: Callable[[Leader], Awaitable[T]]) -> T:
        deadline = self._clock.monotonic() + self._retry_for
        delay = 0.05
        while True:
            leader, _, node = self._leader(stream_id)
            if leader is None:
                raise UnknownStream(stream_id)  # not in the catalog: deleted, or never was
            try:
                return await self._until_moved(node, {stream_id}, call(leader))
            except LeaderUnavailable:
                if self._clock.monotonic() >= deadline:
                    raise
            await self._clock.sleep(delay)
            delay = min(delay * 2, 0.5)
            await self._refresh()

    async def read_index(
        self, stream_id: int, offset: int, max_bytes: int, read_committed: bool = False
    ) -> ReadIndexResult:
        return await self._read(
            stream_id, lambda ld: ld.read_index(stream_id, offset, max_bytes, read_committed)
        )

    async def stable_offset(self, stream_id: int) -> int:
        return await self._read(stream_id, lambda ld: ld.stable_offset(stream_id))

    async def offsets(self, stream_id: int) -> tuple[int, int, int]:
        return await self._read(stream_id, lambda ld: ld.offsets(stream_id))

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]:
        return await self._read(
            stream_id, lambda ld: ld.entries_from_timestamp(stream_id, timestamp)
        )

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None:
        return await self._read(stream_id, lambda ld: ld.max_timestamp_entry(stream_id))

    async def changed(self, stream_id: int) -> asyncio.Future[None]:
        return await self._read(stream_id, lambda ld: ld.changed(stream_id))

    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        return await self._read(stream_id, lambda ld: ld.delete_records(stream_id, offset))

    async def producers(self, stream_id: int) -> list[ActiveProducer]:
        return await self._read(stream_id, lambda ld: ld.producers(stream_id))
