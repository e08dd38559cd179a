"""Key-based cleaning of a compacted partition's stream objects, as Kafka's log cleaner does.

Pure: entries and bytes in, cleaned stream objects out; the clock is passed in.
The compactor of the partition's leader does the I/O (maintenance/cleaning.py;
docs/storage.md, "Compacted topics"):

1. `plan_cleaning(entries, config, now)`: Kafka's `LogCleanerManager`. The
   *clean* part is the run of entries from the log start whose object keys carry
   the clean mark (`-c`, written by an earlier cleaning); the *dirty* part
   follows it up to the first uncleanable offset: the active segment, the WAL
   tail, and the first segment with a record newer than `min.compaction.lag.ms`
   are never cleaned. It is due when the dirty ratio passes
   `min.cleanable.dirty.ratio`, when a dirty segment's first batch is older
   than `max.compaction.lag.ms`, or when a clean object's mark says a
   tombstone's delete horizon has passed.
2. `build_offset_map(dirty parts)`: the latest offset of each key of the dirty part.
3. `clean(parts of clean + dirty, map, ...)`: Kafka's `Cleaner.cleanInto` and
   `MemoryRecords.filterTo`: the latest record per key survives, tombstones until
   their batch's delete horizon (KIP-534), records without a key go; surviving
   records are re-batched per original batch (records/retain.py). Transactions
   follow Kafka's rules (storage/txn_cleaning.py): an aborted transaction's
   batches go, markers stay until a delete horizon set once their transaction's
   batches are all gone, committed records follow the key rules, and nothing at
   or above the last stable offset is cleaned (the plan ends below it).
4. `build_cleaned_objects(...)`: the stream objects to PUT, keys carrying the
   clean mark, and their chunk entries, to swap for the entries cleaned.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from zonegate.records.batch import BatchHeader, iter_batches
from zonegate.records.codecs import KAFKA_LEVELS, CompressionLevels
from zonegate.records.retain import (
    StoredRecord,
    delete_horizon,
    empty_batch,
    rebuild_batch,
    stored_records,
)
from zonegate.storage.index import IndexEntry
from zonegate.storage.segments import SegmentSummary
from zonegate.storage.stream_objects import StreamObject, build_stream_object, is_stream_key
from zonegate.storage.txn_cleaning import EMPTY, CleanedTransactions, control_type
from zonegate.transactions.partition_txns import AbortedTxn

CLEAN_MARK = "-c"
NO_LIMIT = 2**63 - 1


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """A compacted topic's configs, as cleaning reads them (Kafka's defaults), parsed
    with its other rules (storage/topic_rules.py)."""

    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = NO_LIMIT
    delete_retention_ms: int = 86_400_000
    segment_ms: int = 604_800_000
    segment_bytes: int = 1 << 30
    codec: int | None = None  # compression.type; None for `producer`: the batch's own
    max_message_bytes: int = 1_048_588
    levels: CompressionLevels = KAFKA_LEVELS  # compression.{gzip,lz4,zstd}.level

    @property
    def segment_window_ms(self) -> int:
        """Kafka rolls a compacted topic's segments at min(segment.ms,
        max.compaction.lag.ms) (LogConfig.maxSegmentMs)."""
        return max(min(self.segment_ms, self.max_compaction_lag_ms), 1)


# -- the clean mark -----------------------------------------------------------------


def clean_key(key: str, horizon: int | None) -> str:
    """A stream object's key marked clean; with the earliest delete horizon of its
    tombstones, when it holds any, so the index says when cleaning is due again."""
    return f"{key}{CLEAN_MARK}{'' if horizon is None else horizon}"


# A stream object's name: first and last offset, leader epoch, random token
# (storage/stream_objects.py), then the clean mark and its horizon if cleaning wrote it.
_MARKED = re.compile(r"\d+-\d+--?\d+-[0-9a-f]+(?:" + CLEAN_MARK + r"(\d*))?")


def clean_mark(key: str) -> tuple[bool, int | None]:
    """(whether the object was written by cleaning, the delete horizon its key carries).
    The mark is read after the random token, never inside it: a token such as
    `c4769217` is not a mark with horizon 4769217."""
    if not is_stream_key(key):
        return False, None
    m = _MARKED.fullmatch(key.rsplit("/", 1)[-1])
    if m is None or m.group(1) is None:
        return False, None
    return True, int(m.group(1)) if m.group(1) else None


# -- 1. the decision ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """What one cleaning would rewrite: the entries of offsets [log start, `end`)."""

    first_dirty: int
    end: int  # the first uncleanable offset
    clean: tuple[IndexEntry, ...]  # below first_dirty: cleaned before, cleaned again
    dirty: tuple[IndexEntry, ...]  # [first_dirty, end): the offset map is built of these
    clean_bytes: int
    dirty_bytes: int
    compaction_delay_ms: int  # > 0: a dirty segment waited past max.compaction.lag.ms
    tombstones_due: bool  # a clean object's delete horizon (tombstones, markers) has passed
    min_ratio: float

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def due(self) -> bool:
        """Kafka's test (grabFilthiestCompactedLog), and tombstones whose time came."""
        return (
            (self.compaction_delay_ms > 0 and self.dirty_bytes > 0)
            or self.dirty_ratio > self.min_ratio
            or self.tombstones_due
        )

    def entries(self, below: int | None = None) -> list[IndexEntry]:
        """The entries to rewrite (and swap out), those below `below` when the offset map
        stopped early."""
        end = self.end if below is None else below
        return [e for e in (*self.clean, *self.dirty) if e.last_offset < end]


def plan_cleaning(
    entries: Sequence[IndexEntry],
    config: CleanerConfig,
    now_ms: int,
    *,
    stable_offset: int | None = None,
) -> CleaningPlan | None:
    """The cleaning of a partition whose entries (offset order, from the log start, WAL
    tail included) are `entries`; None when it has nothing to clean. `stable_offset`:
    the last stable offset (the high watermark when no transaction is open), when some
    entries lie above it: the segment holding it and all after are never cleaned
    (Kafka's firstUnstableOffset in LogCleanerManager.cleanableOffsets)."""
    if not entries:
        return None
    step = config.segment_window_ms
    segments = SegmentSummary.of(entries, step, config.segment_bytes).segments
    bases = [s.base_offset for s in segments]

    def segment_base(offset: int) -> int:
        """The base offset of the segment holding `offset` (Kafka cleans whole segments)."""
        return max((b for b in bases if b <= offset), default=bases[0])

    first_dirty = entries[-1].last_offset + 1
    for e in entries:
        if not clean_mark(e.object_key)[0]:
            first_dirty = e.base_offset
            break
    log_end = entries[-1].last_offset + 1
    candidates = [log_end]
    if stable_offset is not None:
        candidates.append(stable_offset)
    last = segments[-1]
    active = last.window >= now_ms // step  # its window is still open: appends join it
    if active:
        candidates.append(last.base_offset)
    tail = next((e.base_offset for e in entries if not is_stream_key(e.object_key)), None)
    if tail is not None:
        candidates.append(tail)
    non_active = segments[:-1] if active else segments
    dirty_segments = [s for s in non_active if s.last_offset >= first_dirty]
    if config.min_compaction_lag_ms > 0:
        young = next(
            (s for s in dirty_segments if s.max_timestamp > now_ms - config.min_compaction_lag_ms),
            None,
        )
        if young is not None:
            candidates.append(young.base_offset)
    end = max(first_dirty, segment_base(min(candidates)) if min(candidates) < log_end else log_end)

    clean = tuple(e for e in entries if e.last_offset < first_dirty)
    dirty = tuple(e for e in entries if e.base_offset >= first_dirty and e.last_offset < end)
    clean_bytes = sum(e.length for e in clean)
    dirty_bytes = sum(e.length for e in dirty)
    if clean_bytes + dirty_bytes == 0:
        return None

    # Kafka's maxCompactionDelay: the first batch timestamp of each dirty segment; an
    # entry's max timestamp stands for its first batch's (a chunk holds a few batches).
    firsts = [
        next(e.max_timestamp for e in entries if e.base_offset >= s.base_offset)
        for s in dirty_segments
    ]
    earliest = min((t for t in firsts if t > 0), default=NO_LIMIT)
    clean_until = now_ms - config.max_compaction_lag_ms
    delay = clean_until - earliest if earliest < clean_until else 0
    horizons = [clean_mark(e.object_key)[1] for e in clean]
    tombstones_due = any(h is not None and h <= now_ms for h in horizons)
    return CleaningPlan(
        first_dirty,
        end,
        clean,
        dirty,
        clean_bytes,
        dirty_bytes,
        delay,
        tombstones_due,
        config.min_cleanable_dirty_ratio,
    )


# -- 2. the offset map --------------------------------------------------------------


@dataclass(slots=True)
class OffsetMap:
    """The latest offset of each key in the dirty part; offsets below `end` were mapped
    (Kafka's `map.latestOffset + 1`)."""

    latest: dict[bytes, int]
    end: int


def build_offset_map(
    dirty: Iterable[tuple[IndexEntry, bytes]],
    plan: CleaningPlan,
    max_message_bytes: int,
    *,
    max_keys: int = 4_000_000,
    aborted: Iterable[AbortedTxn] = (),
) -> OffsetMap:
    """The map of the dirty part's records (its entries, in order, with their bytes).
    Stops after the entry that brings it to `max_keys` keys (Kafka's dedupe buffer,
    128 MiB, holds about 5 million): the cleaning then ends there, the rest stays dirty.
    `aborted`: the partition's aborted transactions; their records stay out of the map,
    so an aborted value never hides the committed one before it (Kafka's
    buildOffsetMapForSegment)."""
    latest: dict[bytes, int] = {}
    txns = CleanedTransactions(aborted)
    for entry, blob in dirty:
        for pos, h in iter_batches(blob):
            if h.is_control or txns.on_batch(h):
                continue  # a marker's effect on the walk is nil for the map
            for r in stored_records(h, blob[pos : pos + h.size], max_message_bytes):
                if r.key is not None:
                    latest[r.key] = r.offset
        if len(latest) >= max_keys and entry.last_offset + 1 < plan.end:
            return OffsetMap(latest, entry.last_offset + 1)
    return OffsetMap(latest, plan.end)


# -- 3. the clean -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CleanedPart:
    """One entry's batches after cleaning: an entry of the cleaned offsets (its key the
    original's, so `build_stream_object` walks its batches), its bytes, and the earliest
    delete horizon of its batches that keep tombstones."""

    entry: IndexEntry
    data: bytes
    delete_horizon: int | None


@dataclass(slots=True)
class CleanerStats:
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_kept: int = 0
    keyless_dropped: int = 0  # Kafka's "invalid messages"
    tombstones_dropped: int = 0
    aborted_dropped: int = 0  # records of aborted transactions
    markers_dropped: int = 0  # commit and abort markers past their delete horizon


def clean(
    parts: Iterable[tuple[IndexEntry, bytes]],
    offsets: OffsetMap,
    config: CleanerConfig,
    now_ms: int,
    *,
    active_producers: Mapping[int, int] = {},
    marker_producers: Mapping[int, int] = {},
    txns: CleanedTransactions | None = None,
    stats: CleanerStats | None = None,
) -> list[CleanedPart]:
    """The cleaned form of `parts`: the entries of `plan.entries(offsets.end)` in order,
    with their bytes. `active_producers`: producer id -> the last offset of its data the
    partition holds (the leader's producer state): that batch stays, empty if need be,
    so the producer's last sequence survives (Kafka's RETAIN_EMPTY). `marker_producers`:
    producer id -> epoch, for producers whose state holds no data batch (a marker of a
    bumped epoch came last): their markers of that epoch stay, empty if need be, as
    Kafka keeps them for fencing. `txns`: the round's transaction state, one for all the
    calls of a round (a fresh one, with no aborted transaction, if None)."""
    st = stats if stats is not None else CleanerStats()
    tx = txns if txns is not None else CleanedTransactions(())
    producers = _Producers(active_producers, marker_producers)
    out: list[CleanedPart] = []
    for entry, blob in parts:
        kept = bytearray()
        first = last = -1
        max_ts = -1
        horizon: int | None = None
        for pos, h in iter_batches(blob):
            batch = blob[pos : pos + h.size]
            st.bytes_read += h.size
            data, batch_horizon = _clean_batch(h, batch, offsets, config, now_ms, producers, tx, st)
            if data is None:
                continue
            if first < 0:
                first = h.base_offset
            last = h.base_offset + h.last_offset_delta
            max_ts = max(max_ts, _max_timestamp(data))
            if batch_horizon is not None:
                horizon = batch_horizon if horizon is None else min(horizon, batch_horizon)
            kept += data
        if kept:
            st.bytes_kept += len(kept)
            new_entry = dataclasses.replace(
                entry,
                base_offset=first,
                last_offset=last,
                position=0,
                length=len(kept),
                max_timestamp=max_ts,
            )
            out.append(CleanedPart(new_entry, bytes(kept), horizon))
    return out


def _max_timestamp(batch: bytes) -> int:
    return next(iter_batches(batch))[1].max_timestamp


@dataclass(frozen=True, slots=True)
class _Producers:
    last_data: Mapping[int, int]
    marker_epochs: Mapping[int, int]

    def keeps(self, h: BatchHeader, last: int) -> bool:
        """Whether the batch holds its producer's state (Kafka's
        isBatchLastRecordOfProducer): the last data batch, else its markers at its
        epoch."""
        if h.producer_id < 0:
            return False
        data = self.last_data.get(h.producer_id)
        if data is not None:
            return data == last
        return h.is_control and self.marker_epochs.get(h.producer_id) == h.producer_epoch


def _clean_batch(
    h: BatchHeader,
    batch: bytes,
    offsets: OffsetMap,
    config: CleanerConfig,
    now_ms: int,
    producers: _Producers,
    txns: CleanedTransactions,
    st: CleanerStats,
) -> tuple[bytes | None, int | None]:
    """One batch after cleaning (None: it goes), and its delete horizon if it keeps a
    tombstone or a marker that may go. Kafka's checkBatchRetention and
    shouldRetainRecord."""
    last = h.base_offset + h.last_offset_delta
    # The round's last batch keeps the last offset.
    retain_empty = producers.keeps(h, last) or last + 1 == offsets.end
    if h.is_control:
        return _clean_marker(h, batch, config, now_ms, retain_empty, txns, st)
    if txns.on_batch(h):
        st.records_read += h.record_count
        st.aborted_dropped += h.record_count
        return (empty_batch(h) if retain_empty else None), None
    horizon = delete_horizon(h)
    records = stored_records(h, batch, config.max_message_bytes)
    st.records_read += len(records)
    kept: list[StoredRecord] = []
    for r in records:
        if r.offset >= offsets.end:
            kept.append(r)
        elif r.key is None:
            st.keyless_dropped += 1
        elif r.offset < offsets.latest.get(r.key, -1):
            continue
        elif r.is_tombstone and horizon is not None and now_ms >= horizon:
            st.tombstones_dropped += 1
        else:
            kept.append(r)
    st.records_kept += len(kept)
    if not kept:
        return (empty_batch(h) if retain_empty else None), None
    tombstones = any(r.is_tombstone for r in kept)
    codec = h.compression if config.codec is None else config.codec
    if tombstones and horizon is None:
        horizon = now_ms + config.delete_retention_ms
    elif len(kept) == len(records) and codec == h.compression:
        return batch, (horizon if tombstones else None)  # Kafka writes the original batch
    if not tombstones:
        horizon = None  # none left to time: no horizon that would call for cleaning again
    return rebuild_batch(h, kept, codec, horizon, config.levels), horizon


def _clean_marker(
    h: BatchHeader,
    batch: bytes,
    config: CleanerConfig,
    now_ms: int,
    retain_empty: bool,
    txns: CleanedTransactions,
    st: CleanerStats,
) -> tuple[bytes | None, int | None]:
    """A control batch after cleaning: a marker whose transaction has no batch left may
    go; it is kept until a delete horizon set now (Kafka piggy-backs markers on the
    tombstones' KIP-534 horizon), then dropped (or emptied, when it holds its
    producer's epoch)."""
    records = stored_records(h, batch, config.max_message_bytes)
    may_go = txns.on_control(h, control_type(records[0].key) if records else EMPTY)
    horizon = delete_horizon(h)
    if may_go and horizon is not None and now_ms >= horizon:
        st.markers_dropped += len(records)
        return (empty_batch(h) if retain_empty else None), None
    if not records:  # emptied by an earlier round: Kafka's DELETE_EMPTY or RETAIN_EMPTY
        return (batch if retain_empty else None), None
    if not may_go:
        return batch, None
    if horizon is None:
        horizon = now_ms + config.delete_retention_ms
        return rebuild_batch(h, records, h.compression, horizon, config.levels), horizon
    return batch, horizon


# -- 4. the objects -----------------------------------------------------------------


def build_cleaned_objects(
    stream_id: int,
    leader_epoch: int,
    parts: Sequence[CleanedPart],
    *,
    segment_ms: int,
    object_bytes: int,
) -> list[StreamObject]:
    """Stream objects of at most about `object_bytes` each holding `parts`, their keys
    marked clean; their entries replace `plan.entries(offsets.end)` in one swap."""
    groups: list[list[CleanedPart]] = []
    size = 0
    for p in parts:
        if not groups or (size + len(p.data) > object_bytes and groups[-1]):
            groups.append([])
            size = 0
        groups[-1].append(p)
        size += len(p.data)
    out: list[StreamObject] = []
    for g in groups:
        obj = build_stream_object(
            stream_id, leader_epoch, [(p.entry, p.data) for p in g], segment_ms=segment_ms
        )
        horizons = [p.delete_horizon for p in g if p.delete_horizon is not None]
        key = clean_key(obj.key, min(horizons) if horizons else None)
        entries = tuple(dataclasses.replace(e, object_key=key) for e in obj.entries)
        out.append(StreamObject(key, obj.data, entries))
    return out
