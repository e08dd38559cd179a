"""Compaction: a leader rewrites its partitions' WAL ranges into stream objects.

A partition's *tail* is its index entries still in WAL objects: one small
range in each object its batches were written to. Every pass (the node runs
one every `--compaction-interval-ms`) the leader looks at the tail of each
partition it leads, one partition at a time, off the produce path, and
rewrites a prefix of it when:

- the tail holds at least `stream_object_bytes` (or the topic's smaller
  `segment.bytes`): that much becomes one stream object; or
- its oldest entry was appended longer ago than min(`segment.ms`,
  `max_delay_ms`): the whole tail is written, in objects of at most
  `stream_object_bytes`.

Steps for one object: read the entries' bytes (GETs coalesced per WAL
object, the log cache first), build the object and its chunk entries
(storage/stream_objects.py, in a worker thread so the event loop keeps
serving), PUT it (crash point `compaction:after-upload`: an orphan that
object GC deletes after its grace), and swap the entries in one metadata
transaction fenced by the leader epoch (`LogChanges.swap`, crash point
`compaction:after-swap`). A swap refused (retention or DeleteRecords took a
part of the range meanwhile, or the leader moved) wastes the work: the object
no row names is deleted at once. The WAL objects the range lay in become
unreferenced once every partition in them moved on, and object GC deletes
them. Every store call goes through the `compaction` I/O class. A compacted
topic's partition is then cleaned by key when due (maintenance/cleaning.py).
Policy (`plan`: which runs of the tail to rewrite now) is a pure function of
the tail, the time and the target; `Compactor` does the I/O.
docs/storage.md, "Compaction: WAL ranges into stream objects", has the design.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from zonegate.leader_forwarder.log_changes import LogChanges
from zonegate.maintenance.cleaning import CleaningTotals, clean_partition
from zonegate.maintenance.targets import Target
from zonegate.runtime.clock import Clock
from zonegate.runtime.crash import crash_point
from zonegate.runtime.io_class import io_class, s3_purpose
from zonegate.storage.index import IndexEntry, UnknownStream
from zonegate.storage.objects import ObjectStore
from zonegate.storage.stream_objects import build_stream_object

log = logging.getLogger(__name__)

STREAM_OBJECT_BYTES = 16 * 1024 * 1024
MAX_DELAY_MS = 540_000  # 9 minutes: with a pass's interval and work, under 10


@dataclass(frozen=True)
class CompactionSettings:
    stream_object_bytes: int = STREAM_OBJECT_BYTES  # --stream-object-bytes
    max_delay_ms: int = MAX_DELAY_MS  # --compaction-max-delay-ms


@dataclass
class CompactionStats:
    passes: int = 0  # finished
    objects_written: int = 0
    bytes_compacted: int = 0  # bytes of WAL ranges rewritten into stream objects
    entries_replaced: int = 0
    swaps_refused: int = 0
    failures: int = 0
    seconds_busy: float = 0.0  # wall time spent rewriting (reads, build, PUT, swap)
    # As of the last pass, over the partitions this node leads:
    backlog_bytes: int = 0  # bytes still in WAL objects
    oldest_ms: int = 0  # age of the oldest entry still in a WAL object
    per_partition: dict[int, int] = field(default_factory=dict)  # stream id -> tail bytes


def plan(
    tail: Sequence[IndexEntry],
    now_ms: int,
    target: Target,
    settings: CompactionSettings,
) -> list[list[IndexEntry]]:
    """The runs of the tail to rewrite now, each one stream object, in offset order."""
    if not tail:
        return []
    size_limit = max(1, min(settings.stream_object_bytes, target.segment_bytes))
    delay = min(target.segment_ms, settings.max_delay_ms)
    too_old = now_ms - (tail[0].append_ms or 0) >= delay
    runs: list[list[IndexEntry]] = []
    run: list[IndexEntry] = []
    size = 0
    for e in tail:
        if run and size + e.length > size_limit:
            runs.append(run)  # full: the next entry does not fit
            run, size = [], 0
        run.append(e)
        size += e.length
    if run and (too_old or size >= size_limit):
        runs.append(run)
    return runs


class Compactor:
    def __init__(
        self,
        changes: LogChanges,
        store: ObjectStore,
        read: Callable[[Sequence[IndexEntry]], Awaitable[list[bytes]]],
        targets: Callable[[], list[Target]],
        clock: Clock,
        settings: CompactionSettings | None = None,
    ) -> None:
        self._changes = changes
        self._store = store
        self._read = read
        self._targets = targets
        self._clock = clock
        self._settings = settings or CompactionSettings()
        self.stats = CompactionStats()
        self.cleaning = CleaningTotals()

    async def run_once(self) -> None:
        backlog: dict[int, int] = {}
        oldest = 0
        with io_class("compaction"):
            for target in self._targets():
                try:
                    await self._compact(target)
                    _, tail = await self._changes.tail(target.stream_id)
                except UnknownStream:
                    continue  # deleted meanwhile
                except Exception:
                    # The next pass tries again; nothing was swapped, an uploaded object
                    # no row names is GC's.
                    self.stats.failures += 1
                    log.exception("compaction of stream %d failed", target.stream_id)
                    continue
                backlog[target.stream_id] = sum(e.length for e in tail)
                if tail:
                    oldest = max(oldest, self._clock.wall_ms() - (tail[0].append_ms or 0))
        self.stats.per_partition = backlog
        self.stats.backlog_bytes = sum(backlog.values())
        self.stats.oldest_ms = oldest
        self.stats.passes += 1  # counted once done, with the figures above as of it

    async def _compact(self, target: Target) -> None:
        epoch, tail = await self._changes.tail(target.stream_id)
        for run in plan(tail, self._clock.wall_ms(), target, self._settings):
            if not await self._rewrite(target, epoch, run):
                return  # refused: the tail changed under us; the next pass replans
        if target.cleaning is not None:
            with s3_purpose("cleaning"):
                await clean_partition(
                    self._changes,
                    self._store,
                    self._read,
                    self._clock,
                    target.stream_id,
                    target.cleaning,
                    object_bytes=self._settings.stream_object_bytes,
                    totals=self.cleaning,
                )

    async def _rewrite(self, target: Target, epoch: int, run: list[IndexEntry]) -> bool:
        started = self._clock.monotonic()
        blobs = await self._read(run)
        obj = await asyncio.to_thread(
            build_stream_object,
            target.stream_id,
            epoch,
            list(zip(run, blobs, strict=True)),
            segment_ms=target.segment_ms,
        )
        del blobs
        await self._store.put(obj.key, obj.data)
        crash_point("compaction:after-upload")
        swapped = await self._changes.swap(target.stream_id, epoch, run, obj.entries)
        self.stats.seconds_busy += self._clock.monotonic() - started
        if not swapped:
            self.stats.swaps_refused += 1
            log.info(
                "compaction of stream %d offsets %d-%d refused (range changed or leader "
                "moved); its object goes",
                target.stream_id,
                run[0].base_offset,
                run[-1].last_offset,
            )
            await self._store.delete_many([obj.key])
            return False
        self.stats.objects_written += 1
        self.stats.bytes_compacted += len(obj.data)
        self.stats.entries_replaced += len(run)
        log.debug(
            "stream %d offsets %d-%d: %d entries into %s (%d bytes, %d chunks)",
            target.stream_id,
            run[0].base_offset,
            run[-1].last_offset,
            len(run),
            obj.key,
            len(obj.data),
            len(obj.entries),
        )
        return True
