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
  `stream_object_bytes`. For a topic that is not cleaned by key, that delay
  is at least `wal_hold_ms` (the GC's orphan grace, within `max_delay_ms`),
  and only the entries that waited half of it are written: a WAL object cannot
  be deleted sooner since its upload, so a range rewritten earlier would be
  stored twice until then, and a short `segment.ms` would make many small
  stream objects for nothing (retention frees stream objects segment by
  segment anyway: maintenance/splitting.py). One pass decides every
  partition at one instant, so the WAL objects the partitions share are let
  go by all of them in the same pass.

A delete-only partition whose retention keeps less than `max_delay_ms` of
appends (`retention.ms` within it, or the partition at its `retention.bytes`
with its oldest data appended less than that ago) has its ranges dropped
from the WAL objects by retention within the bound, so
only full objects are written for it: a rewrite would keep its bytes twice
for `log.segment.delete.delay.ms` (the WAL objects' and the stream objects'
deletions each wait it), for data about to go anyway. Nothing stays in a WAL
object longer than `max_delay_ms` either way: the tail is never older than
the oldest data kept.

A topic deleting by time gets objects cut at segment boundaries, each holding
at most `retention.ms` / `RETENTION_SHARE` of appends (`object_window_ms`):
a short retention gets one object per segment, as Kafka's segment rule
frees them; a long one with a short `segment.ms` still gets large objects.
One deleting by size gets objects ending at the first segment boundary past
`retention.bytes` / `RETENTION_SHARE`.

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
The partition's stream objects just below a run are merged into its object by
size tiers (`merge_previous`), so a slowly written partition keeps a few
objects, not one per delay. Policy (`plan`: which runs of the tail to rewrite
now; `merge_previous`; `replan_at`) is a pure function of the entries, the time
and the target; `Compactor` does the I/O.

A partition whose tail is not due yet (one record each to 100,000 partitions
leaves 100,000 tails waiting their delay) is not planned again at every pass:
its plan changes only with its tail, its head, its topic's configs or the time
`replan_at` names, so a pass skips it until one of those moved, and costs a
few dictionary lookups for it, not a plan.
docs/storage.md, "Compaction: WAL ranges into stream objects", has the design.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from zonegate.leader_forwarder.log_changes import LogChanges
from zonegate.maintenance.cleaning import CleaningTotals, clean_partition
from zonegate.maintenance.targets import Target
from zonegate.runtime.clock import Clock
from zonegate.runtime.crash import crash_point
from zonegate.runtime.io_class import io_class, s3_purpose
from zonegate.storage.cleaner import clean_mark
from zonegate.storage.index import IndexEntry, UnknownStream
from zonegate.storage.objects import ObjectStore
from zonegate.storage.stream_objects import StreamObject, build_stream_object

log = logging.getLogger(__name__)

STREAM_OBJECT_BYTES = 16 * 1024 * 1024
MAX_DELAY_MS = 540_000  # 9 minutes: with a pass's interval and work, under 10
# A stream object of a topic deleting by time spans at most this share of retention.ms
# (whole segments): the bucket's excess over what retention keeps stays a small share of
# it until the head split (maintenance/splitting.py) frees even that segment by segment.
RETENTION_SHARE = 32
# At most this many of a partition's stream objects are merged into the next one
# (`merge_previous`): with objects doubling, enough for 2**8 runs' worth at once.
MERGE_MAX_OBJECTS = 8


@dataclass(frozen=True)
class CompactionSettings:
    stream_object_bytes: int = STREAM_OBJECT_BYTES  # --stream-object-bytes
    max_delay_ms: int = MAX_DELAY_MS  # --compaction-max-delay-ms
    wal_hold_ms: int = 0  # --gc-orphan-grace-ms: WAL objects live that long anyway
    merge: bool = True  # small stream objects merged (False: benchmarks/slow_writes.py)


@dataclass
class CompactionStats:
    passes: int = 0  # finished
    objects_written: int = 0
    bytes_compacted: int = 0  # bytes of WAL ranges rewritten into stream objects
    entries_replaced: int = 0
    objects_merged: int = 0  # stream objects merged into a later one (written again)
    bytes_merged: int = 0  # their bytes (not counted in bytes_compacted)
    swaps_refused: int = 0
    failures: int = 0
    seconds_busy: float = 0.0  # wall time spent rewriting (reads, build, PUT, swap)
    # As of the last pass, over the partitions this node leads:
    backlog_bytes: int = 0  # bytes still in WAL objects
    oldest_ms: int = 0  # age of the oldest entry still in a WAL object
    # stream id -> tail bytes, of the partitions with a tail
    per_partition: dict[int, int] = field(default_factory=dict)


def object_window_ms(target: Target) -> int:
    """How long a span of appends one stream object of the partition may hold: 0 (only
    its size bounds it) unless its topic deletes by time; then a whole number of its
    segments, as many as fit in `retention.ms` / `RETENTION_SHARE` (one at least).
    Objects are cut where appends enter another window of that length on the clock:
    segment boundaries, since segment windows start at multiples of `segment.ms` too."""
    if target.retention_ms < 0:
        return 0
    seg = max(target.segment_ms, 1)
    return seg * max(1, target.retention_ms // RETENTION_SHARE // seg)


def object_limit(target: Target, settings: CompactionSettings) -> int:
    """The most bytes one stream object of the partition holds."""
    return max(1, min(settings.stream_object_bytes, target.segment_bytes))


def may_merge(run: Sequence[IndexEntry], target: Target, settings: CompactionSettings) -> bool:
    """Whether any earlier stream object could join `run` (`merge_previous`), told
    without I/O: a full run (every object compaction writes at speed) leaves no room,
    so the index is not read for it."""
    return (
        settings.merge
        and target.cleaning is None
        and sum(e.length for e in run) < object_limit(target, settings)
    )


def _window_of(e: IndexEntry, span: int) -> int:
    return e.window_ms // span if span else 0


def merge_previous(
    previous: Sequence[IndexEntry],
    above: Sequence[IndexEntry],
    target: Target,
    settings: CompactionSettings,
) -> bool:
    """Whether a stream object of the partition (`previous`: its entries, offset order)
    is written again as part of the object that holds `above` (the entries from just
    above it up to the end of the tail's first run to write, which may hold later stream
    objects merged already).

    Size-tiered, as an LSM tree merges: the object holds no more bytes than `above`
    (so a slowly written partition's objects grow by doubling, and a byte is written
    again about log2(object / run) times, not once per pass), and the whole fits in
    one object; not for a partition cleaned by key (cleaning rewrites those itself),
    not a cleaned object, and never across the limits compaction cuts at for retention
    (a topic deleting by time: its object window; by size: under its share of
    retention.bytes), so retention frees merged objects as before (docs/storage.md,
    "Small stream objects merged")."""
    if not previous or not above or target.cleaning is not None or not settings.merge:
        return False
    if previous[-1].last_offset + 1 != above[0].base_offset:
        return False
    if clean_mark(previous[0].object_key)[0]:
        return False
    size = sum(e.length for e in previous)
    have = sum(e.length for e in above)
    limit = object_limit(target, settings)
    if size > have or size + have > limit:
        return False
    window = object_window_ms(target)
    if _window_of(previous[0], window) != _window_of(above[-1], window):
        return False
    share = target.retention_bytes // RETENTION_SHARE if target.retention_bytes >= 0 else None
    return share is None or size + have < share


def _delay_ms(target: Target, settings: CompactionSettings) -> int:
    """How long a tail's oldest entry waits before the whole tail is written."""
    delay = target.segment_ms
    if target.cleaning is None:  # held: a compacted topic's cleaning waits for its ranges
        delay = max(delay, settings.wal_hold_ms)
    return min(delay, settings.max_delay_ms)


def replan_at(
    tail: Sequence[IndexEntry],
    now_ms: int,
    target: Target,
    settings: CompactionSettings,
    head_append_ms: int | None = None,
) -> int:
    """When `plan`, having found nothing to write in `tail` at `now_ms`, may first find
    something over the same entries, head and target: when the oldest entry has waited
    the delay, or when a partition at its retention.bytes passes the bound with its
    oldest data kept (no longer `expires_first`). Before that every plan is empty too:
    the time enters `plan` only through those two. `max_delay_ms` from now at the latest."""
    at = now_ms + settings.max_delay_ms
    if tail:
        due = (tail[0].append_ms or 0) + _delay_ms(target, settings)
        if due > now_ms:
            at = min(at, due)
    if head_append_ms is not None and head_append_ms + settings.max_delay_ms > now_ms:
        at = min(at, head_append_ms + settings.max_delay_ms)
    return at


def plan(
    tail: Sequence[IndexEntry],
    now_ms: int,
    target: Target,
    settings: CompactionSettings,
    head_append_ms: int | None = None,
    kept_bytes: int = 0,
) -> list[list[IndexEntry]]:
    """The runs of the tail to rewrite now, each one stream object, in offset order.
    `head_append_ms`: when the partition's oldest data kept was appended (None: unknown);
    `kept_bytes`: the bytes it keeps."""
    if not tail:
        return []
    size_limit = object_limit(target, settings)
    delay = _delay_ms(target, settings)
    held = target.cleaning is None  # a compacted topic's cleaning waits for its ranges
    window = object_window_ms(target)
    # By size: a run ends at the first segment boundary once it holds this share.
    share = target.retention_bytes // RETENTION_SHARE if target.retention_bytes >= 0 else None
    seg = max(target.segment_ms, 1)

    def waited(e: IndexEntry) -> bool:
        return now_ms - (e.append_ms or 0) >= delay

    def half_waited(e: IndexEntry) -> bool:
        return now_ms - (e.append_ms or 0) >= delay // 2

    def boundary(run: list[IndexEntry], size: int, e: IndexEntry) -> bool:
        if _window_of(e, window) != _window_of(run[0], window):
            return True
        return (
            share is not None and size >= share and _window_of(e, seg) != _window_of(run[-1], seg)
        )

    # Candidate objects: cut where the next entry would not fit (full) or at a boundary
    # above (not full: written once it waited, like the tail's end).
    candidates: list[tuple[list[IndexEntry], bool]] = []
    run: list[IndexEntry] = []
    size = 0
    for e in tail:
        overflow = size + e.length > size_limit
        if run and (overflow or boundary(run, size, e)):
            candidates.append((run, overflow))
            run, size = [], 0
        run.append(e)
        size += e.length
    candidates.append((run, size >= size_limit))
    # A delete-only partition keeping less than the delay bound: retention drops its
    # ranges from the WAL objects in time, and a rewrite would only store them twice for
    # log.segment.delete.delay.ms more (each deletion waits it).
    by_time = 0 <= target.retention_ms <= settings.max_delay_ms
    by_size = (  # at its size limit, and its oldest data younger than the bound
        0 <= target.retention_bytes <= kept_bytes
        and head_append_ms is not None
        and now_ms - head_append_ms < settings.max_delay_ms
    )
    expires_first = held and (by_time or by_size)
    too_old = waited(tail[0]) and not expires_first
    runs: list[list[IndexEntry]] = []
    for run, full in candidates:
        if full:
            runs.append(run)
            continue
        if not too_old:
            break
        # Held: only what waited, or half of it once the oldest waited it all (entries are
        # appended in offset order, so a prefix): a partition written a little at a time
        # gets an object every half delay at most, not one per pass.
        ripe = list(itertools.takewhile(half_waited, run)) if held else run
        if ripe:
            runs.append(ripe)
        if len(ripe) < len(run):
            break  # in offset order: nothing after an entry left in the tail
    return runs


@dataclass(frozen=True, slots=True)
class _Waiting:
    """A partition whose plan found nothing to write: skipped by the passes until `due_ms`
    unless its topic's target or its log (`mark`: LogChanges.tail_mark) changed."""

    target: Target
    mark: tuple[int, int, int, int, int | None]
    due_ms: int
    tail_bytes: int  # for the backlog figures of the passes that skip it
    first_append_ms: int


class Compactor:
    def __init__(
        self,
        changes: LogChanges,
        store: ObjectStore,
        read: Callable[[Sequence[IndexEntry]], Awaitable[list[bytes]]],
        targets: Callable[[], list[Target]],
        clock: Clock,
        settings: CompactionSettings | None = None,
        on_rewritten: Callable[[], None] | None = None,
    ) -> None:
        self._on_rewritten = on_rewritten  # WAL ranges went: object GC may reclaim
        self._changes = changes
        self._store = store
        self._read = read
        self._targets = targets
        self._clock = clock
        self._settings = settings or CompactionSettings()
        self.stats = CompactionStats()
        self.cleaning = CleaningTotals()
        # The partitions whose tails are waiting (class _Waiting), as of the last pass;
        # one per led partition with a tail at most.
        self._waiting: dict[int, _Waiting] = {}

    async def run_once(self) -> None:
        backlog: dict[int, int] = {}
        oldest = 0
        now = self._clock.wall_ms()  # one instant for every partition of the pass
        written = self.stats.objects_written
        waiting: dict[int, _Waiting] = {}
        skipped_first: int | None = None  # the oldest append of the tails skipped
        with io_class("compaction"):
            for target in self._targets():
                sid = target.stream_id
                if target.cleaning is None and self._changes.settled(sid):
                    continue  # nothing in WAL objects (and no backlog to count)
                w = self._waiting.get(sid)
                if (
                    w is not None
                    and now < w.due_ms
                    and (w.target is target or w.target == target)
                    and w.mark == self._changes.tail_mark(sid)
                ):
                    waiting[sid] = w  # the same plan as last pass: nothing to write
                    backlog[sid] = w.tail_bytes
                    if skipped_first is None or w.first_append_ms < skipped_first:
                        skipped_first = w.first_append_ms
                    continue
                try:
                    if (w := await self._compact(target, now)) is not None:
                        waiting[sid] = w
                    _, tail = await self._changes.tail(target.stream_id)
                except UnknownStream:
                    continue  # deleted meanwhile
                except Exception:
                    # The next pass tries again; nothing was swapped, an uploaded object
                    # no row names is GC's.
                    self.stats.failures += 1
                    log.exception("compaction of stream %d failed", target.stream_id)
                    continue
                if tail:
                    backlog[target.stream_id] = sum(e.length for e in tail)
                    oldest = max(oldest, self._clock.wall_ms() - (tail[0].append_ms or 0))
        if skipped_first is not None:
            oldest = max(oldest, self._clock.wall_ms() - skipped_first)
        self._waiting = waiting  # partitions gone, settled or written drop out
        self.stats.per_partition = backlog
        self.stats.backlog_bytes = sum(backlog.values())
        self.stats.oldest_ms = oldest
        self.stats.passes += 1  # counted once done, with the figures above as of it
        if self.stats.objects_written > written and self._on_rewritten is not None:
            self._on_rewritten()

    async def _compact(self, target: Target, now_ms: int) -> _Waiting | None:
        """Writes what the plan says is due; a `_Waiting` when nothing was."""
        epoch, tail = await self._changes.tail(target.stream_id)
        view = await self._changes.head(target.stream_id)
        head = view.segments
        # The start of the oldest segment's window: no later than its first append.
        head_ms = head[0].window * max(target.segment_ms, 1) if head else None
        kept = sum(s.bytes for s in head)
        runs = plan(tail, now_ms, target, self._settings, head_ms, kept)
        # A compacted topic's partition is cleaned below at every pass (cleaning.py
        # decides when it is due), so it never waits here.
        if not runs and tail and target.cleaning is None:
            # As LogChanges.tail_mark reads it, from the tail planned on: a change made
            # while the head was read shows as a mark that differs.
            mark = (
                view.leader_epoch,
                view.log_start_offset,
                view.high_watermark,
                len(tail),
                tail[0].base_offset,
            )
            due = replan_at(tail, now_ms, target, self._settings, head_ms)
            size = sum(e.length for e in tail)
            return _Waiting(target, mark, due, size, tail[0].append_ms or 0)
        merged = (0, 0)  # earlier stream objects the first run starts with, their bytes
        for _ in range(
            MERGE_MAX_OBJECTS if runs and may_merge(runs[0], target, self._settings) else 0
        ):
            below = await self._changes.last_object_before(target.stream_id, runs[0][0].base_offset)
            if not merge_previous(below, runs[0], target, self._settings):
                break
            runs[0] = [*below, *runs[0]]
            merged = (merged[0] + 1, merged[1] + sum(e.length for e in below))
        for group in _swap_groups(runs, self._settings):
            if not await self._rewrite(target, epoch, group, merged):
                return None  # refused: the tail changed under us; the next pass replans
            merged = (0, 0)
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
        return None

    async def _rewrite(
        self,
        target: Target,
        epoch: int,
        runs: list[list[IndexEntry]],
        merged: tuple[int, int] = (0, 0),
    ) -> bool:
        """Writes each run as a stream object, and swaps them all in at once; `merged`:
        the earlier stream objects the first run starts with, and their bytes."""
        started = self._clock.monotonic()
        old = [e for run in runs for e in run]
        blobs = iter(await self._read(old))
        parts = [[(e, next(blobs)) for e in run] for run in runs]
        objs = await asyncio.to_thread(
            _build_objects, target.stream_id, epoch, parts, target.segment_ms
        )
        del blobs, parts
        await asyncio.gather(*(self._store.put(obj.key, obj.data) for obj in objs))
        crash_point("compaction:after-upload")
        new = [e for obj in objs for e in obj.entries]
        swapped = await self._changes.swap(target.stream_id, epoch, old, new)
        self.stats.seconds_busy += self._clock.monotonic() - started
        if not swapped:
            self.stats.swaps_refused += 1
            log.info(
                "compaction of stream %d offsets %d-%d refused (range changed or leader "
                "moved); its objects go",
                target.stream_id,
                old[0].base_offset,
                old[-1].last_offset,
            )
            await self._store.delete_many([obj.key for obj in objs])
            return False
        self.stats.objects_written += len(objs)
        self.stats.bytes_compacted += sum(len(obj.data) for obj in objs) - merged[1]
        self.stats.objects_merged += merged[0]
        self.stats.bytes_merged += merged[1]
        self.stats.entries_replaced += len(old)
        log.debug(
            "stream %d offsets %d-%d: %d entries into %d objects from %s",
            target.stream_id,
            old[0].base_offset,
            old[-1].last_offset,
            len(old),
            len(objs),
            objs[0].key,
        )
        return True


def _build_objects(
    stream_id: int, epoch: int, parts: list[list[tuple[IndexEntry, bytes]]], segment_ms: int
) -> list[StreamObject]:
    return [build_stream_object(stream_id, epoch, p, segment_ms=segment_ms) for p in parts]


def _swap_groups(
    runs: list[list[IndexEntry]], settings: CompactionSettings
) -> list[list[list[IndexEntry]]]:
    """Consecutive runs swapped together, at most `stream_object_bytes` of them (one run
    at least): many small objects (a short segment.ms) cost one metadata transaction,
    and a partition's WAL ranges go at once rather than object by object."""
    groups: list[list[list[IndexEntry]]] = []
    size = 0
    for run in runs:
        n = sum(e.length for e in run)
        if not groups or size + n > settings.stream_object_bytes:
            groups.append([])
            size = 0
        groups[-1].append(run)
        size += n
    return groups
