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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.messages import (
    ANY_EPOCH,
    AppendBatch,
    AppendResult,
    ReadIndexResult,
)
from zonegate.metastore.models import MetaStoreUnavailable
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
)
from zonegate.storage.segments import Segment, SegmentSummary
from zonegate.storage.stream_objects import is_stream_key

log = logging.getLogger(__name__)
_SEQ_MOD = 1 << 31
_PRODUCER_BATCHES_KEPT = 5
# Entries a read below the tail asks the store for at once; the client asks again.
_STORE_READ_LIMIT = 1000
_TIME_LOOKUP_LIMIT = 4
# Kafka's defaults of segment.ms and segment.bytes, for a leader told no topic's.
KAFKA_SEGMENTING = (604_800_000, 1_073_741_824)


def _up_to(entries: Sequence[IndexEntry], max_bytes: int) -> list[IndexEntry]:
    """The first entries within `max_bytes` (at least one)."""
    out: list[IndexEntry] = []
    total = 0
    for e in entries:
        if out and total + e.length > max_bytes:
            break
        out.append(e)
        total += e.length
    return out


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _SEQ_MOD - 1)


@dataclass
class _Partition:
    """What a leader keeps of a partition: its offsets and producers, a summary of its
    segments, and its tail (the entries still in WAL objects); the rest of its index
    is read from the store when asked for (docs/storage.md, "The bounded index")."""

    stream_id: int
    leader_epoch: int
    log_start_offset: int
    high_watermark: int
    producers: dict[int, ProducerEntry]
    summary: SegmentSummary
    tail: StreamIndex
    changed: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def notify(self) -> None:
        if not self.changed.done():
            self.changed.set_result(None)
        self.changed = asyncio.get_running_loop().create_future()


@dataclass(frozen=True, slots=True)
class HeadView:
    """What retention decides on: the partition's segments (oldest first) and offsets."""

    leader_epoch: int
    log_start_offset: int
    high_watermark: int
    segments: tuple[Segment, ...]


@dataclass
class _Tentative:
    """A partition's state as the current cycle would leave it, applied only after commit."""

    next_offset: int
    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    entries: list[IndexEntry] = field(default_factory=list)


class LeaderService:
    def __init__(
        self,
        metastore: StreamStore,
        clock: Clock = SYSTEM_CLOCK,
        segmenting: Callable[[int], tuple[int, int]] | None = None,
    ) -> None:
        self._meta = metastore
        self._clock = clock
        # stream id -> (segment.ms, segment.bytes) of its topic, as in force now.
        self._segmenting = segmenting or (lambda _sid: KAFKA_SEGMENTING)
        self._partitions: dict[int, _Partition] = {}
        self._loading: dict[int, asyncio.Future[_Partition]] = {}
        self._queue: list[tuple[Sequence[AppendBatch], asyncio.Future[list[AppendResult]]]] = []
        self._committer: asyncio.Task[None] | None = None
        # The streams of the cycle being committed, and a future completed when it is.
        self._committing: set[int] = set()
        self._committed: asyncio.Future[None] | None = None
        self._store_down = False  # said in the log once, until a commit succeeds again
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
            # A commit of this partition in flight (its state was dropped meanwhile: a
            # catalog change, a failed cycle) lands first: a load that read the store
            # before it would hand the next cycle offsets that commit took.
            while stream_id in self._committing and self._committed is not None:
                await asyncio.shield(self._committed)
            state = await self._meta.load_partition(stream_id)
            # Read once, to draw the segments and keep the tail; not kept whole.
            entries = await self._meta.read_index(stream_id)
            # The store's log start, not the first entry's offset: cleaning a compacted
            # topic removes records from the head without moving it (as Kafka's segments
            # keep their base offsets).
            log_start = state.log_start_offset
            in_streams = max(
                (i + 1 for i, e in enumerate(entries) if is_stream_key(e.object_key)), default=0
            )
            p = _Partition(
                stream_id=stream_id,
                leader_epoch=state.leader_epoch,
                log_start_offset=log_start,
                high_watermark=state.next_offset,
                producers=dict(state.producers),
                summary=SegmentSummary.of(entries, *self._segmenting(stream_id)),
                tail=StreamIndex(entries[in_streams:]),
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

    def forget_unless_at(self, epochs: Mapping[int, int]) -> None:
        """Drops the cached state of each partition not held at the given leader epoch
        (this node leads it at that epoch now): state loaded at the new epoch already,
        when its first append came before the catalog said so, is kept."""
        self.forget(
            sid
            for sid, epoch in epochs.items()
            if (p := self._partitions.get(sid)) is not None and p.leader_epoch != epoch
        )

    # -- append -----------------------------------------------------------
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        """Each batch's offset or error. With the metadata store out of reach, batches
        not yet sent to it get KAFKA_STORAGE_ERROR (nothing written; Kafka's answer
        when a log cannot be written) and those of a commit that failed get
        REQUEST_TIMED_OUT (the outcome unknown); clients retry both, and the log says
        so once, not once per request."""
        try:
            results = await self._append(batches)
        except MetaStoreUnavailable as exc:
            self._store_lost(exc)
            return [AppendResult(ErrorCode.kafka_storage_error)] * len(batches)
        if self._store_down and any(r.error == ErrorCode.none for r in results):
            self._store_down = False
            log.warning("appends are committed again")
        return results

    def _store_lost(self, exc: MetaStoreUnavailable) -> None:
        if not self._store_down:
            self._store_down = True
            log.warning("appends fail until the metadata store is back: %s", exc)

    async def _append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
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
            answers = iter(await self._append(known) if known else [])
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
            self._committing = {b.stream_id for batches, _ in cycle for b in batches}
            self._committed = asyncio.get_running_loop().create_future()
            try:
                await self._commit_cycle(cycle)
            except Exception as exc:
                if isinstance(exc, MetaStoreUnavailable):
                    self._store_lost(exc)
                else:
                    log.exception("group commit of %d appends failed", len(cycle))
                # The commit may have landed before the error (a connection lost after
                # COMMIT was sent): reload these partitions from the store before their
                # next append, or the next commit would reuse offsets already indexed;
                # and answer REQUEST_TIMED_OUT, the outcome unknown, not an error that
                # says nothing was written (directory.py).
                self.forget(self._committing)
                for batches, fut in cycle:
                    if not fut.done():
                        fut.set_result([AppendResult(ErrorCode.request_timed_out)] * len(batches))
            finally:
                self._committing = set()
                if not self._committed.done():
                    self._committed.set_result(None)

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
            q = self._partitions.get(c.stream_id)
            if q is None or q.leader_epoch != c.leader_epoch:
                # Dropped (moved, or reloaded) while this commit was in flight: it is in
                # the store all the same, and whoever loads the partition next sees it.
                # Its callers must hear that it was written, not an error they would
                # answer with a retry.
                continue
            t = tentative[c.stream_id]
            q.producers.update(t.producers)
            q.summary.configure(*self._segmenting(c.stream_id))
            q.summary.extend(t.entries)
            q.tail.extend(t.entries)
            q.high_watermark = t.next_offset
            q.notify()
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
        """Index entries from the one holding `offset`, up to `max_bytes` (at least one):
        from the tail in memory, or from the store below it."""
        p = await self._partition(stream_id)
        hwm, start = p.high_watermark, p.log_start_offset
        if offset < start or offset > hwm:
            return ReadIndexResult(ErrorCode.offset_out_of_range, (), hwm, start, p.leader_epoch)
        tail_first = p.tail.first_offset
        if tail_first is not None and offset >= tail_first:
            out = p.tail.from_offset(offset, max_bytes)
        else:
            rows = await self._meta.read_entries(
                stream_id,
                offset,
                to_offset=None if tail_first is None else tail_first - 1,
                limit=_STORE_READ_LIMIT,
            )
            out = _up_to(rows, max_bytes)
            if not out and tail_first is not None:
                out = p.tail.from_offset(offset, max_bytes)
        return ReadIndexResult(ErrorCode.none, tuple(out), hwm, start, p.leader_epoch)

    async def offsets(self, stream_id: int) -> tuple[int, int, int]:
        """(log start offset, high watermark, leader epoch)."""
        p = await self._partition(stream_id)
        return p.log_start_offset, p.high_watermark, p.leader_epoch

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]:
        """The first entries (offset order) whose max timestamp reaches `timestamp`: the
        summary names the segment, the store or the tail its entries."""
        p = await self._partition(stream_id)
        for seg in p.summary.segments:
            if seg.max_timestamp < timestamp:
                continue
            out = await self._in_range(
                p,
                seg.base_offset,
                seg.last_offset,
                lambda t: t.from_timestamp(timestamp),
                lambda lo, hi: self._meta.entries_at_time(
                    stream_id, timestamp, lo, hi, _TIME_LOOKUP_LIMIT
                ),
            )
            found = [e for e in out if e.max_timestamp >= timestamp][:_TIME_LOOKUP_LIMIT]
            if found:
                return found
        return []

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None:
        p = await self._partition(stream_id)
        seg = p.summary.newest()
        if seg is None:
            return None

        async def newest(lo: int, hi: int) -> list[IndexEntry]:
            e = await self._meta.newest_entry(stream_id, lo, hi)
            return [] if e is None else [e]

        def newest_in_tail(t: StreamIndex) -> list[IndexEntry]:
            e = t.max_timestamp_entry()
            return [] if e is None else [e]

        found = await self._in_range(p, seg.base_offset, seg.last_offset, newest_in_tail, newest)
        best: IndexEntry | None = None
        for e in found:
            if best is None or e.max_timestamp > best.max_timestamp:
                best = e
        return best

    async def _in_range(
        self,
        p: _Partition,
        lo: int,
        hi: int,
        in_tail: Callable[[StreamIndex], list[IndexEntry]],
        in_store: Callable[[int, int], Awaitable[list[IndexEntry]]],
    ) -> list[IndexEntry]:
        """A lookup over the entries of offsets lo..hi: the store's part below the tail,
        then the tail's part, in offset order."""
        tail_first = p.tail.first_offset
        out: list[IndexEntry] = []
        if tail_first is None or lo < tail_first:
            out += await in_store(lo, hi if tail_first is None else min(hi, tail_first - 1))
        if tail_first is not None and hi >= tail_first:
            part = StreamIndex(
                e for e in p.tail.entries() if e.base_offset <= hi and e.last_offset >= lo
            )
            out += in_tail(part)
        return out

    # -- the head of the log --------------------------------------------------
    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        """Moves the log start offset up to `offset` (-1: the high watermark)."""
        p = await self._partition(stream_id)
        if offset == -1:
            offset = p.high_watermark
        if offset < 0 or offset > p.high_watermark:
            return ErrorCode.offset_out_of_range, p.log_start_offset
        return await self._truncate(p, offset)

    async def head(self, stream_id: int) -> HeadView:
        p = await self._partition(stream_id)
        return HeadView(
            p.leader_epoch,
            p.log_start_offset,
            p.high_watermark,
            tuple(p.summary.segments),
        )

    async def truncate(self, stream_id: int, leader_epoch: int, offset: int) -> bool:
        """Moves the log start up to `offset` (at most the high watermark of a `head`
        taken at `leader_epoch`); False when the partition is no longer led at that
        epoch, and nothing changed."""
        p = await self._partition(stream_id)
        if p.leader_epoch != leader_epoch:
            return False  # reloaded at another epoch: the next pass decides again
        error, _ = await self._truncate(p, offset)
        return error == ErrorCode.none

    async def _truncate(self, p: _Partition, offset: int) -> tuple[ErrorCode, int]:
        try:
            start = await self._meta.truncate_head(p.stream_id, p.leader_epoch, offset)
        except LeaderEpochFenced:
            self.forget([p.stream_id])
            return ErrorCode.not_leader_or_follower, -1
        crash_point("retention:after-commit")
        if self._partitions.get(p.stream_id) is p:
            p.log_start_offset = max(p.log_start_offset, start)
            p.tail.drop_before(p.log_start_offset)
            partial = p.summary.drop_before(p.log_start_offset)
            if partial is not None:
                # The start moved inside a segment: what is left of it, from the store.
                rows = await self._meta.read_entries(
                    p.stream_id, partial.base_offset, to_offset=partial.last_offset, limit=1 << 30
                )
                partial.bytes = sum(e.length for e in rows)
            p.notify()
        return ErrorCode.none, start

    def stored_bytes(self) -> int:
        """Bytes of stored batches of the partitions this leader holds."""
        return sum(p.summary.total_bytes for p in self._partitions.values())

    # -- compaction (maintenance/compaction.py) --------------------------
    async def tail(self, stream_id: int) -> tuple[int, list[IndexEntry]]:
        """(leader epoch, the entries still in WAL objects, in offset order)."""
        p = await self._partition(stream_id)
        return p.leader_epoch, p.tail.entries()

    async def swap(
        self,
        stream_id: int,
        leader_epoch: int,
        old: Sequence[IndexEntry],
        new: Sequence[IndexEntry],
    ) -> bool:
        """Replaces entries `old` (a prefix of the tail) with `new` (their rewrite) in the
        store, fenced by `leader_epoch`, then in memory; False when the store refused
        (a part of `old` went meanwhile, or the epoch moved)."""
        try:
            done = await self._meta.replace_entries(stream_id, leader_epoch, old, new)
        except LeaderEpochFenced:
            self.forget([stream_id])
            return False
        except UnknownStream:
            return False
        crash_point("compaction:after-swap")
        p = self._partitions.get(stream_id)
        if done and p is not None and p.leader_epoch == leader_epoch:
            p.tail.drop_before(old[-1].last_offset + 1)
            p.summary.replace(old, new)  # cleaning shrinks what it rewrites
        return done

    async def cleaning_view(
        self, stream_id: int
    ) -> tuple[int, int, list[IndexEntry], dict[int, int]]:
        """What key-based cleaning (storage/cleaner.py) decides on: (leader epoch, high
        watermark, every entry from the log start, the last offset of each producer the
        partition keeps state for)."""
        p = await self._partition(stream_id)
        last = {pid: e.batches[-1].last_offset for pid, e in p.producers.items() if e.batches}
        entries = await self._meta.read_entries(stream_id, p.log_start_offset, limit=1 << 30)
        return p.leader_epoch, p.high_watermark, entries, last

    async def changed(self, stream_id: int) -> asyncio.Future[None]:
        """A future completed at the next high-watermark move (or state drop) of the partition."""
        return (await self._partition(stream_id)).changed
