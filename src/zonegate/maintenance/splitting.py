"""Splitting at the head: retention frees a stream object's bytes segment by segment.

Compaction writes a partition's WAL ranges into stream objects of up to
`--stream-object-bytes`, which may span many of the topic's segments (a
short `segment.ms`), and an object goes only once no index entry names any
part of it. Retention drops whole segments (maintenance/retention.py), so
left alone a partition would keep up to a whole stream object beyond what
Kafka's segment rule keeps. Instead, whenever a retention pass moves a
partition's log start, the stream object now holding the start, if its
entries lie in more than one segment, is rewritten as one stream object per
segment (one read of it, one PUT per segment) and swapped for it in one
transaction fenced by the leader epoch (`LogChanges.swap`); every segment
retention drops later then frees its own object. Only the object at the head
is split, once, so a catch-up reader meets small objects only there, and
each byte is rewritten at most once. A cleaned object's pieces keep its clean
mark (storage/cleaner.py), so splitting never makes cleaned data dirty.
docs/storage.md, "Retention after compaction", has why this and not objects
cut at every segment boundary.

Policy (`plan_split`: which runs of the head object become objects) is pure;
`HeadSplitter` does the I/O.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from zonegate.leader_forwarder.log_changes import LogChanges
from zonegate.runtime.io_class import io_class
from zonegate.storage.cleaner import clean_key, clean_mark
from zonegate.storage.index import IndexEntry
from zonegate.storage.objects import ObjectStore
from zonegate.storage.segments import Segment
from zonegate.storage.stream_objects import StreamObject, build_stream_object, is_stream_key

log = logging.getLogger(__name__)


def plan_split(
    entries: Sequence[IndexEntry], segments: Sequence[Segment]
) -> list[list[IndexEntry]]:
    """The runs, one per segment in offset order, that the object holding the log start
    is rewritten into, given its entries from the log start on (`entries`, offset order)
    and the partition's segments; [] when it stays: it is not a stream object (a WAL
    object goes with the other partitions' ranges in it), or its entries lie in one
    segment."""
    if not entries or not is_stream_key(entries[0].object_key):
        return []
    key = entries[0].object_key
    bases = [s.base_offset for s in segments]
    runs: list[list[IndexEntry]] = []
    current = -1
    for e in entries:
        if e.object_key != key:
            break  # the object's entries are consecutive: the next object begins
        # The entry holding the log start may begin below the first segment's base.
        seg = max(bisect.bisect_right(bases, e.base_offset) - 1, 0)
        if not runs or seg != current:
            runs.append([])
            current = seg
        runs[-1].append(e)
    return runs if len(runs) > 1 else []


def build_split_objects(
    stream_id: int,
    leader_epoch: int,
    runs: Sequence[Sequence[tuple[IndexEntry, bytes]]],
    *,
    segment_ms: int,
) -> list[StreamObject]:
    """One stream object per run, keeping a cleaned object's clean mark (with its
    earliest delete horizon: a piece is then due for cleaning no later than the whole)."""
    cleaned, horizon = clean_mark(runs[0][0][0].object_key)
    out: list[StreamObject] = []
    for run in runs:
        obj = build_stream_object(stream_id, leader_epoch, run, segment_ms=segment_ms)
        if cleaned:
            key = clean_key(obj.key, horizon)
            entries = tuple(dataclasses.replace(e, object_key=key) for e in obj.entries)
            obj = StreamObject(key, obj.data, entries)
        out.append(obj)
    return out


@dataclass
class SplitStats:
    objects_split: int = 0
    objects_written: int = 0
    bytes_rewritten: int = 0
    swaps_refused: int = 0


class HeadSplitter:
    def __init__(
        self,
        changes: LogChanges,
        store: ObjectStore,
        read: Callable[[Sequence[IndexEntry]], Awaitable[list[bytes]]],
        segmenting: Callable[[int], tuple[int, int]],
    ) -> None:
        self._changes = changes
        self._store = store
        self._read = read
        self._segmenting = segmenting  # (segment.ms, segment.bytes) of a stream's topic
        self.stats = SplitStats()

    async def split(self, stream_id: int) -> int:
        """Splits the object holding the partition's log start by segment, when it spans
        more than one; the bytes rewritten (0: nothing to split, or the swap was refused
        because the head changed meanwhile and the next move of the start decides again)."""
        epoch, entries, segments = await self._changes.head_object(stream_id)
        runs = plan_split(entries, segments)
        if not runs:
            return 0
        old = [e for run in runs for e in run]
        with io_class("compaction"):
            blobs = iter(await self._read(old))
            parts = [[(e, next(blobs)) for e in run] for run in runs]
            objs = await asyncio.to_thread(
                build_split_objects,
                stream_id,
                epoch,
                parts,
                segment_ms=self._segmenting(stream_id)[0],
            )
            del parts, blobs
            keys: list[str] = []
            try:
                for obj in objs:
                    await self._store.put(obj.key, obj.data)
                    keys.append(obj.key)
                new = [e for obj in objs for e in obj.entries]
                swapped = await self._changes.swap(stream_id, epoch, old, new)
            except BaseException:
                if keys:  # no row names them: delete now rather than after the orphan grace
                    await asyncio.shield(self._store.delete_many(keys))
                raise
            if not swapped:
                self.stats.swaps_refused += 1
                await self._store.delete_many(keys)
                return 0
        size = sum(len(obj.data) for obj in objs)
        self.stats.objects_split += 1
        self.stats.objects_written += len(objs)
        self.stats.bytes_rewritten += size
        log.debug(
            "stream %d: the head object %s split into %d objects by segment (%d bytes)",
            stream_id,
            old[0].object_key,
            len(objs),
            size,
        )
        return size
