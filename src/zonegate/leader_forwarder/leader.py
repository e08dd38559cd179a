"""The leader of a set of partitions: assigns offsets, enforces idempotence, group-commits.

Appends from every proxy queue up; one committer task takes everything queued,
checks each batch against the partition's producer state (the last five
batches per producer, as Kafka keeps), assigns base offsets, and commits the
index entries of all partitions of the cycle in one metadata-store transaction
fenced by leader epoch. Only then does the high watermark move and do the
callers get their offsets. While one cycle commits, the next fills: the group
commit is the natural batching, with no timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.messages import (
    ANY_EPOCH,
    AppendBatch,
    AppendResult,
    ReadIndexResult,
)
from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.runtime.crash import crash_point
from zonegate.storage.index import (
    IndexEntry,
    LeaderEpochFenced,
    PartitionCommit,
    ProducerBatch,
    ProducerEntry,
    StreamIndex,
    StreamStore,
    UnknownStream,
    retention_start,
)

log = logging.getLogger(__name__)
_SEQ_MOD = 1 << 31
_PRODUCER_BATCHES_KEPT = 5


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _SEQ_MOD - 1)


@dataclass
class _Partition:
    stream_id: int
    leader_epoch: int
    log_start_offset: int
    high_watermark: int
    producers: dict[int, ProducerEntry]
    index: StreamIndex
    changed: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def notify(self) -> None:
        if not self.changed.done():
            self.changed.set_result(None)
        self.changed = asyncio.get_running_loop().create_future()


@dataclass(frozen=True, slots=True)
class RetentionRule:
    """A topic's retention configs in force (Kafka's meanings; -1 turns a limit off)."""

    retention_ms: int
    retention_bytes: int
    segment_ms: int
    segment_bytes: int


@dataclass
class _Tentative:
    """A partition's state as the current cycle would leave it, applied only after commit."""

    next_offset: int
    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    entries: list[IndexEntry] = field(default_factory=list)


class LeaderService:
    def __init__(self, metastore: StreamStore, clock: Clock = SYSTEM_CLOCK) -> None:
        self._meta = metastore
        self._clock = clock
        self._partitions: dict[int, _Partition] = {}
        self._loading: dict[int, asyncio.Future[_Partition]] = {}
        self._queue: list[tuple[Sequence[AppendBatch], asyncio.Future[list[AppendResult]]]] = []
        self._committer: asyncio.Task[None] | None = None
        self.commit_cycles = 0

    # -- partition state --------------------------------------------------
    async def _partition(self, stream_id: int) -> _Partition:
        p = self._partitions.get(stream_id)
        if p is not None:
            return p
        pending = self._loading.get(stream_id)
        if pending is not None:
            return await pending
        fut: asyncio.Future[_Partition] = asyncio.get_running_loop().create_future()
        self._loading[stream_id] = fut
        try:
            state = await self._meta.load_partition(stream_id)
            index = StreamIndex(await self._meta.read_index(stream_id))
            log_start = state.log_start_offset
            if index.first_offset is not None:
                log_start = max(log_start, index.first_offset)
            p = _Partition(
                stream_id=stream_id,
                leader_epoch=state.leader_epoch,
                log_start_offset=log_start,
                high_watermark=state.next_offset,
                producers=dict(state.producers),
                index=index,
            )
            self._partitions[stream_id] = p
            fut.set_result(p)
            return p
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: the awaiting callers see it too
            raise
        finally:
            del self._loading[stream_id]

    def forget(self, stream_ids: Iterable[int]) -> None:
        """Drops cached state (partition deleted or moved); the next use reloads it."""
        for sid in stream_ids:
            p = self._partitions.pop(sid, None)
            if p is not None:
                p.notify()

    # -- append -----------------------------------------------------------
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        newest: dict[int, int] = {}
        for b in batches:
            newest[b.stream_id] = max(newest.get(b.stream_id, ANY_EPOCH), b.leader_epoch)
        unknown: set[int] = set()
        for sid, epoch in newest.items():
            try:
                p = await self._partition(sid)
                if epoch > p.leader_epoch:
                    # The partition moved here (again) since we cached it: reload its state.
                    self.forget([sid])
                    await self._partition(sid)
            except UnknownStream:
                unknown.add(sid)  # its topic was deleted meanwhile, or the caller is wrong
        if unknown:
            known = [b for b in batches if b.stream_id not in unknown]
            answers = iter(await self.append(known) if known else [])
            return [
                AppendResult(ErrorCode.unknown_topic_or_partition)
                if b.stream_id in unknown
                else next(answers)
                for b in batches
            ]
        fut: asyncio.Future[list[AppendResult]] = asyncio.get_running_loop().create_future()
        self._queue.append((batches, fut))
        if self._committer is None or self._committer.done():
            self._committer = asyncio.get_running_loop().create_task(self._commit_loop())
        return await fut

    async def _commit_loop(self) -> None:
        while self._queue:
            cycle, self._queue = self._queue, []
            try:
                await self._commit_cycle(cycle)
            except Exception as exc:
                log.exception("group commit failed; %d appends get a storage error", len(cycle))
                # The commit may have landed before the error (a connection lost after
                # COMMIT was sent): reload these partitions from the store before their
                # next append, or the next commit would reuse offsets already indexed.
                self.forget({b.stream_id for batches, _ in cycle for b in batches})
                for _, fut in cycle:
                    if not fut.done():
                        fut.set_exception(exc)

    async def _commit_cycle(
        self, cycle: list[tuple[Sequence[AppendBatch], asyncio.Future[list[AppendResult]]]]
    ) -> None:
        tentative: dict[int, _Tentative] = {}
        results: list[list[AppendResult]] = []
        now = self._clock.wall_ms()  # every entry of the cycle is appended at once
        for batches, _ in cycle:
            results.append([self._sequence(b, tentative, now) for b in batches])
        commits = []
        for sid, t in tentative.items():
            if not t.entries:
                continue
            p = self._partitions[sid]
            commits.append(
                PartitionCommit(
                    stream_id=sid,
                    leader_epoch=p.leader_epoch,
                    next_offset=t.next_offset,
                    entries=tuple(t.entries),
                    producers=tuple(t.producers.values()),
                )
            )
        fenced = await self._meta.commit_appends(commits) if commits else set()
        self.commit_cycles += 1
        for c in commits:
            if c.stream_id in fenced:
                continue
            p = self._partitions[c.stream_id]
            t = tentative[c.stream_id]
            p.producers.update(t.producers)
            p.index.extend(t.entries)
            p.high_watermark = t.next_offset
            p.notify()
        if fenced:
            log.warning("appends to streams %s fenced: leader epoch moved", sorted(fenced))
            self.forget(fenced)
        for (batches, fut), res in zip(cycle, results, strict=True):
            if fut.done():
                continue
            fut.set_result(
                [
                    AppendResult(ErrorCode.not_leader_or_follower) if b.stream_id in fenced else r
                    for b, r in zip(batches, res, strict=True)
                ]
            )

    def _sequence(self, b: AppendBatch, tentative: dict[int, _Tentative], now: int) -> AppendResult:
        p = self._partitions.get(b.stream_id)
        if p is None:
            return AppendResult(ErrorCode.not_leader_or_follower)
        if b.leader_epoch != ANY_EPOCH and b.leader_epoch != p.leader_epoch:
            code = (
                ErrorCode.fenced_leader_epoch
                if b.leader_epoch < p.leader_epoch
                else ErrorCode.unknown_leader_epoch
            )
            return AppendResult(code)
        t = tentative.get(b.stream_id)
        if t is None:
            t = tentative[b.stream_id] = _Tentative(next_offset=p.high_watermark)
        last_seq = -1
        prior: tuple[ProducerBatch, ...] = ()
        batch_last = (b.base_sequence + b.record_count - 1) % _SEQ_MOD
        if b.producer_id >= 0:
            entry = t.producers.get(b.producer_id) or p.producers.get(b.producer_id)
            if entry is not None:
                if b.producer_epoch < entry.epoch:
                    return AppendResult(ErrorCode.invalid_producer_epoch)
                if b.producer_epoch == entry.epoch:
                    for old in entry.batches:
                        if old.first_seq == b.base_sequence and old.last_seq == batch_last:
                            # A retry of a batch already appended: answer with its offset.
                            return AppendResult(ErrorCode.none, old.base_offset, p.log_start_offset)
                    last_seq = entry.last_seq
                    if entry.batches and not _in_sequence(last_seq, b.base_sequence):
                        return AppendResult(ErrorCode.out_of_order_sequence_number)
                    prior = entry.batches
                elif b.base_sequence != 0:
                    return AppendResult(ErrorCode.out_of_order_sequence_number)
        base = t.next_offset
        last = base + b.record_count - 1
        t.next_offset = last + 1
        t.entries.append(
            IndexEntry(base, last, b.object_key, b.position, b.length, b.max_timestamp, now)
        )
        if b.producer_id >= 0:
            kept = prior[-(_PRODUCER_BATCHES_KEPT - 1) :] + (
                ProducerBatch(b.base_sequence, batch_last, base, last),
            )
            t.producers[b.producer_id] = ProducerEntry(b.producer_id, b.producer_epoch, kept)
        return AppendResult(ErrorCode.none, base, p.log_start_offset)

    # -- reads ------------------------------------------------------------
    async def read_index(self, stream_id: int, offset: int, max_bytes: int) -> ReadIndexResult:
        """Index entries from the one holding `offset`, up to `max_bytes` (at least one)."""
        p = await self._partition(stream_id)
        hwm, start = p.high_watermark, p.log_start_offset
        if offset < start or offset > hwm:
            return ReadIndexResult(ErrorCode.offset_out_of_range, (), hwm, start, p.leader_epoch)
        out = p.index.from_offset(offset, max_bytes)
        return ReadIndexResult(ErrorCode.none, tuple(out), hwm, start, p.leader_epoch)

    async def offsets(self, stream_id: int) -> tuple[int, int, int]:
        """(log start offset, high watermark, leader epoch)."""
        p = await self._partition(stream_id)
        return p.log_start_offset, p.high_watermark, p.leader_epoch

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]:
        """Entries from the first whose max timestamp reaches `timestamp`, in offset order."""
        return (await self._partition(stream_id)).index.from_timestamp(timestamp)

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None:
        return (await self._partition(stream_id)).index.max_timestamp_entry()

    # -- the head of the log --------------------------------------------------
    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        """Moves the log start offset up to `offset` (-1: the high watermark)."""
        p = await self._partition(stream_id)
        if offset == -1:
            offset = p.high_watermark
        if offset < 0 or offset > p.high_watermark:
            return ErrorCode.offset_out_of_range, p.log_start_offset
        return await self._truncate(p, offset)

    async def apply_retention(self, stream_id: int, rule: RetentionRule) -> tuple[int, int]:
        """Kafka's retention over the partition's segments (docs/storage.md); the index
        entries and bytes it dropped."""
        p = await self._partition(stream_id)
        segments = p.index.segments(rule.segment_ms, rule.segment_bytes)
        now = self._clock.wall_ms()
        start = retention_start(
            segments, p.high_watermark, now, rule.retention_ms, rule.retention_bytes
        )
        if start is None or start <= p.log_start_offset:
            return 0, 0
        entries, size = len(p.index), p.index.stored_bytes()
        error, _ = await self._truncate(p, start)
        if error != ErrorCode.none:
            return 0, 0
        return entries - len(p.index), size - p.index.stored_bytes()

    async def _truncate(self, p: _Partition, offset: int) -> tuple[ErrorCode, int]:
        try:
            start = await self._meta.truncate_head(p.stream_id, p.leader_epoch, offset)
        except LeaderEpochFenced:
            self.forget([p.stream_id])
            return ErrorCode.not_leader_or_follower, -1
        crash_point("retention:after-commit")
        if self._partitions.get(p.stream_id) is p:
            p.log_start_offset = max(p.log_start_offset, start)
            p.index.drop_before(p.log_start_offset)
            p.notify()
        return ErrorCode.none, start

    def stored_bytes(self) -> int:
        """Bytes of stored batches the partitions cached here refer to."""
        return sum(p.index.stored_bytes() for p in self._partitions.values())

    async def changed(self, stream_id: int) -> asyncio.Future[None]:
        """A future completed at the next high-watermark move (or state drop) of the partition."""
        return (await self._partition(stream_id)).changed
