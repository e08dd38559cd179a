"""A led partition's log changed other than by appends, and the views those changes are
decided on.

Two changes, each one metadata transaction fenced by the leader epoch, then the
leader's memory follows: moving the log start (DeleteRecords, and retention
when the storage jobs decide it: maintenance/retention.py), and swapping index
entries for their rewrite (compaction and key-based cleaning:
maintenance/compaction.py, maintenance/cleaning.py). The views (the head's
segments, the object at the head for splitting, the tail, every entry for
cleaning) are what the jobs' pure
policies read; the leader decides nothing here but whether it still leads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.partitions import PartitionState, PartitionStates
from zonegate.runtime.crash import crash_point
from zonegate.runtime.principal import who
from zonegate.storage.index import IndexEntry, LeaderEpochFenced, StreamStore, UnknownStream
from zonegate.storage.segments import Segment
from zonegate.storage.stream_objects import stream_object_offsets
from zonegate.transactions.partition_txns import AbortedTxn

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleaningView:
    """What key-based cleaning (storage/cleaner.py) decides on."""

    leader_epoch: int
    high_watermark: int
    stable_offset: int  # the LSO: nothing at or above it is cleaned
    entries: list[IndexEntry]  # every entry from the log start
    last_data: dict[int, int]  # producer id -> the last offset of its data it holds
    marker_epochs: dict[int, int]  # producer id -> epoch, for those with no data batch kept
    aborted: tuple[AbortedTxn, ...]  # the aborted-transaction index from the log start


@dataclass(frozen=True, slots=True)
class HeadView:
    """What retention decides on: the partition's segments (oldest first) and offsets."""

    leader_epoch: int
    log_start_offset: int
    high_watermark: int
    segments: tuple[Segment, ...]


class LogChanges:
    def __init__(self, partitions: PartitionStates, metastore: StreamStore) -> None:
        self._partitions = partitions
        self._meta = metastore

    # -- the log start ------------------------------------------------------
    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        """Moves the log start offset up to `offset` (-1: the high watermark)."""
        p = await self._partitions.get(stream_id)
        if offset == -1:
            offset = p.high_watermark
        if offset < 0 or offset > p.high_watermark:
            return ErrorCode.offset_out_of_range, p.log_start_offset
        error, start = await self._truncate(p, offset)
        if error is ErrorCode.none:
            # The client's principal, whichever node it reached (runtime/principal.py).
            log.info("stream %d: records before %d deleted (by %s)", stream_id, offset, who())
        return error, start

    async def head(self, stream_id: int) -> HeadView:
        p = await self._partitions.get(stream_id)
        return HeadView(
            p.leader_epoch,
            p.log_start_offset,
            p.high_watermark,
            tuple(p.summary.segments),
        )

    async def head_object(
        self, stream_id: int
    ) -> tuple[int, list[IndexEntry], tuple[Segment, ...]]:
        """What splitting at the head decides on (maintenance/splitting.py): (leader epoch,
        the entries of the object holding the log start, from it on, the segments)."""
        p = await self._partitions.get(stream_id)
        epoch, segments = p.leader_epoch, tuple(p.summary.segments)
        first = await self._meta.read_entries(stream_id, p.log_start_offset, limit=1)
        if not first:
            return epoch, [], segments
        key = first[0].object_key
        span = stream_object_offsets(key)
        if span is None:  # a WAL object: one entry of this partition
            return epoch, first, segments
        rows = await self._meta.read_entries(
            stream_id, first[0].base_offset, to_offset=span[1], limit=1 << 30
        )
        return epoch, [e for e in rows if e.object_key == key], segments

    async def truncate(self, stream_id: int, leader_epoch: int, offset: int) -> bool:
        """Moves the log start up to `offset` (at most the high watermark of a `head`
        taken at `leader_epoch`); False when the partition is no longer led at that
        epoch, and nothing changed."""
        p = await self._partitions.get(stream_id)
        if p.leader_epoch != leader_epoch:
            return False  # reloaded at another epoch: the next pass decides again
        error, _ = await self._truncate(p, offset)
        return error == ErrorCode.none

    async def _truncate(self, p: PartitionState, offset: int) -> tuple[ErrorCode, int]:
        try:
            start = await self._meta.truncate_head(p.stream_id, p.leader_epoch, offset)
        except LeaderEpochFenced:
            self._partitions.forget([p.stream_id])
            return ErrorCode.not_leader_or_follower, -1
        crash_point("retention:after-commit")
        if self._partitions.cached(p.stream_id) is p:
            p.log_start_offset = max(p.log_start_offset, start)
            p.tail.drop_before(p.log_start_offset)
            # The store dropped the aborted-index rows wholly below it in the same commit.
            p.txns.drop_aborted_below(p.log_start_offset)
            partial = p.summary.drop_before(p.log_start_offset)
            if partial is not None:
                # The start moved inside a segment: what is left of it, from the store.
                rows = await self._meta.read_entries(
                    p.stream_id, partial.base_offset, to_offset=partial.last_offset, limit=1 << 30
                )
                partial.bytes = sum(e.length for e in rows)
            p.notify()
        return ErrorCode.none, start

    # -- rewrites (compaction, cleaning) ------------------------------------------
    def settled(self, stream_id: int) -> bool:
        """Whether the partition is held with nothing in WAL objects (an empty tail), so
        compaction has nothing to rewrite: until an append, which goes through this held
        state, puts some there. Asked without loading anything, so a pass over 100,000
        led partitions, few of them written lately, visits only those few."""
        p = self._partitions.cached(stream_id)
        return p is not None and len(p.tail) == 0

    def tail_mark(self, stream_id: int) -> tuple[int, int, int, int, int | None] | None:
        """(leader epoch, log start, high watermark, tail length, tail's first offset) of
        the partition held, None when not held: any change to its tail or head (an
        append, a swap, a truncation, a reload) changes it. Compaction skips a partition
        whose mark, among others, is as when it last found nothing to write."""
        p = self._partitions.cached(stream_id)
        if p is None:
            return None
        t = p.tail
        return (p.leader_epoch, p.log_start_offset, p.high_watermark, len(t), t.first_offset)

    async def tail(self, stream_id: int) -> tuple[int, list[IndexEntry]]:
        """(leader epoch, the entries still in WAL objects, in offset order)."""
        p = await self._partitions.get(stream_id)
        return p.leader_epoch, p.tail.entries()

    async def last_object_before(self, stream_id: int, offset: int) -> list[IndexEntry]:
        """The entries of the stream object that ends just below `offset`, when one does
        and all of it lies above the log start; [] otherwise (a WAL range is there, or
        nothing). What compaction merges small objects by (maintenance/compaction.py)."""
        p = await self._partitions.get(stream_id)
        if offset <= p.log_start_offset:
            return []
        rows = await self._meta.read_entries(stream_id, offset - 1, limit=1)
        if not rows or rows[0].last_offset != offset - 1:
            return []
        key = rows[0].object_key
        span = stream_object_offsets(key)
        if span is None or span[0] < p.log_start_offset:
            return []
        rows = await self._meta.read_entries(stream_id, span[0], to_offset=span[1], limit=1 << 30)
        return [e for e in rows if e.object_key == key]

    async def swap(
        self,
        stream_id: int,
        leader_epoch: int,
        old: Sequence[IndexEntry],
        new: Sequence[IndexEntry],
        *,
        drop_aborted: Sequence[AbortedTxn] = (),
    ) -> bool:
        """Replaces entries `old` (a prefix of the tail) with `new` (their rewrite) in the
        store, fenced by `leader_epoch`, then in memory; False when the store refused
        (a part of `old` went meanwhile, or the epoch moved). `drop_aborted`: aborted
        transactions cleaning left no record of, out of the index in the same commit."""
        markers = [a.last_offset for a in drop_aborted]
        try:
            done = await self._meta.replace_entries(
                stream_id, leader_epoch, old, new, drop_aborted=markers
            )
        except LeaderEpochFenced:
            self._partitions.forget([stream_id])
            return False
        except UnknownStream:
            return False
        crash_point("compaction:after-swap")
        p = self._partitions.cached(stream_id)
        if done and p is not None and p.leader_epoch == leader_epoch:
            p.tail.drop_before(old[-1].last_offset + 1)
            p.summary.replace(old, new)  # cleaning shrinks what it rewrites
            p.txns.drop_aborted(markers)
        return done

    async def cleaning_view(self, stream_id: int) -> CleaningView:
        p = await self._partitions.get(stream_id)
        last_data = {pid: e.batches[-1].last_offset for pid, e in p.producers.items() if e.batches}
        epochs = {pid: e.epoch for pid, e in p.producers.items() if not e.batches}
        entries = await self._meta.read_entries(stream_id, p.log_start_offset, limit=1 << 30)
        return CleaningView(
            p.leader_epoch,
            p.high_watermark,
            p.txns.last_stable_offset(p.high_watermark),
            entries,
            last_data,
            epochs,
            tuple(p.txns.aborted),
        )
