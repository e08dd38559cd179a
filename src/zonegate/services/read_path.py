"""The read path: index entries from the partition's leader, bytes from the log cache or the
object store, offsets by time, where leader epochs end.

Fetch long polls wait on the leader's high-watermark changes (no polling)
until `min_bytes` are there or `max_wait` passes. Each batch's base offset and
partition leader epoch are patched on the way out (the CRC does not cover
them); batches are never decompressed on this path. An entry of a stream
object is a chunk of whole batches with final offsets: its batches wholly
below the fetch offset are left out, and the byte limits are kept at batch
boundaries (at least one batch per answer, as Kafka). Each read pass takes at
most MAX_GETS_PER_FETCH object-store GETs (storage/reader.py), however far
behind the consumer is. By timestamp, the first stored entry whose max
timestamp reaches the target is read and decoded (a chunk's batches each at
its own base offset; within the topic's max.message.bytes) to find the exact
first record at or after it, as Kafka's time index does.

The object-store reads are scheduled (docs/qos.md) as `tail_fetch` when they
read WAL objects and the first batch read was appended less than
`tail_window_ms` ago (a consumer at the end of the log whose data this node
did not write, so the log cache missed), else as `catch_up_fetch` (a consumer
reading history; stream objects always, storage/reader.py): by the data's age,
not the consumer's lag in offsets, which means nothing without the rate.

A partition that is deleted meanwhile answers UNKNOWN_TOPIC_OR_PARTITION, one
whose leader stays out of reach NOT_LEADER_OR_FOLLOWER (the client refreshes
its metadata and retries, as with Kafka). A partition whose bytes the object
store fails to give (after the store's own retries) answers KAFKA_STORAGE_ERROR,
as Kafka answers a failed log read: the client retries it, and the other
partitions of the request are answered as usual.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.api import Leader, LeaderUnavailable
from zonegate.metastore.models import TopicInfo
from zonegate.records.batch import CorruptBatch, iter_batches, patch_batch
from zonegate.records.decode import Record, decode_records
from zonegate.runtime.clock import Clock
from zonegate.runtime.io_class import io_class
from zonegate.services.api import FetchedPartition, FetchPartition, OffsetAnswer
from zonegate.storage.index import IndexEntry, UnknownStream
from zonegate.storage.objects import ObjectStoreError
from zonegate.storage.reader import MAX_GETS_PER_READ, StreamReader
from zonegate.storage.stream_objects import is_stream_key
from zonegate.storage.topic_rules import TopicRules

log = logging.getLogger(__name__)

# Object-store GETs one Fetch read pass may take however far behind its consumer is: a
# reader of thousands of small batches gets them over several answers, each cheap.
MAX_GETS_PER_FETCH = MAX_GETS_PER_READ
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
UNDEFINED = -1
TAIL_WINDOW_MS = 60_000
# What a failed object-store read raises once the store's retries are spent
# (storage/instrumented.py gives up with the last attempt's error).
STORE_FAILURES = (ObjectStoreError, TimeoutError, OSError)


class ReadCatalog(Protocol):
    """What the read path asks of the node's topics (services/catalog.py's Catalog)."""

    def get(self, name: str) -> TopicInfo | None:
        """The topic as this node knows it, without a metadata-store read."""
        ...

    async def lookup(self, name: str) -> TopicInfo | None:
        """The topic, also when another node made it since this node last looked."""
        ...

    def rules(self, topic: TopicInfo) -> TopicRules:
        """The topic's rules, parsed when its configs or the defaults last changed."""
        ...


class EpochHistory(Protocol):
    """Where each leader epoch of a partition ended (storage's StreamStore)."""

    async def epoch_end_offset(self, stream_id: int, epoch: int) -> tuple[int, int] | None: ...


def partition_error(exc: UnknownStream | LeaderUnavailable) -> ErrorCode:
    """The error of a partition its leader could not serve: deleted meanwhile, or its
    leader out of reach after the directory's retries."""
    if isinstance(exc, UnknownStream):
        return ErrorCode.unknown_topic_or_partition
    return ErrorCode.not_leader_or_follower


@dataclass(slots=True)
class _Part:
    answer: FetchedPartition
    offset: int
    max_bytes: int
    stream_id: int = -1
    entries: tuple[IndexEntry, ...] = field(default_factory=tuple)
    read_committed: bool = False


class ReadService:
    def __init__(
        self,
        catalog: ReadCatalog,
        leaders: Leader,
        reader: StreamReader,
        epochs: EpochHistory,
        clock: Clock,
        *,
        tail_window_ms: int = TAIL_WINDOW_MS,
    ) -> None:
        self._catalog = catalog
        self._leaders = leaders
        self._reader = reader
        self._epochs = epochs
        self._clock = clock
        self._tail_window_ms = tail_window_ms

    def read_class(self, entry: IndexEntry) -> str:
        """The I/O class of reading `entry` from the object store (module docstring)."""
        recent = entry.append_ms and self._clock.wall_ms() - entry.append_ms <= self._tail_window_ms
        return "tail_fetch" if recent else "catch_up_fetch"

    # -- fetch ------------------------------------------------------------------
    async def fetch(
        self,
        partitions: Sequence[FetchPartition],
        *,
        max_bytes: int,
        min_bytes: int,
        max_wait_s: float,
        read_committed: bool = False,
    ) -> list[FetchedPartition]:
        parts: list[_Part] = []
        for fp in partitions:
            part = _Part(FetchedPartition(fp.topic, fp.partition), fp.offset, fp.max_bytes)
            part.read_committed = read_committed
            topic = self._catalog.get(fp.topic)
            if topic is None or not 0 <= fp.partition < len(topic.partitions):
                part.answer.error = ErrorCode.unknown_topic_or_partition
            else:
                part.stream_id = topic.partitions[fp.partition].stream_id
            parts.append(part)
        clock = self._clock
        deadline = clock.monotonic() + max_wait_s
        min_bytes = max(min_bytes, 1)
        while True:
            waits: list[asyncio.Future[None]] = []
            for p in parts:
                if p.stream_id >= 0 and p.answer.error == ErrorCode.none:
                    try:
                        waits.append(await self._leaders.changed(p.stream_id))
                    except (UnknownStream, LeaderUnavailable) as exc:
                        p.answer.error = partition_error(exc)
            total = await self._read_all(parts, max_bytes)
            remaining = deadline - clock.monotonic()
            if (
                total >= min_bytes
                or remaining <= 0
                or not waits
                or any(p.answer.error != ErrorCode.none for p in parts)
            ):
                break
            timer = asyncio.ensure_future(clock.sleep(remaining))
            try:
                await asyncio.wait([*waits, timer], return_when=asyncio.FIRST_COMPLETED)
            finally:
                timer.cancel()
            if clock.monotonic() >= deadline:
                await self._read_all(parts, max_bytes)
                break
        return [p.answer for p in parts]

    async def _read_all(self, parts: list[_Part], max_bytes: int) -> int:
        total = 0
        gets_left = MAX_GETS_PER_FETCH
        for p in parts:
            p.answer.records = b""
            if p.stream_id < 0 or p.answer.error != ErrorCode.none:
                continue
            try:
                read, gets = await self._read_one(p, max_bytes, total, gets_left)
            except (UnknownStream, LeaderUnavailable) as exc:
                p.answer.error = partition_error(exc)
                continue
            except STORE_FAILURES as exc:
                log.warning("Fetch of %s-%d: %r", p.answer.topic, p.answer.partition, exc)
                p.answer.error, p.answer.records = ErrorCode.kafka_storage_error, b""
                continue
            total += read
            gets_left -= gets
        self._reader.gets_per_fetch.observe(MAX_GETS_PER_FETCH - gets_left)
        return total

    async def _read_one(
        self, p: _Part, max_bytes: int, total: int, gets_left: int
    ) -> tuple[int, int]:
        """Reads one partition into `p`: (bytes read, GETs taken)."""
        a = p.answer
        budget = min(p.max_bytes, max(max_bytes - total, 0))
        if budget <= 0 and total > 0:
            a.log_start_offset, a.high_watermark, a.leader_epoch = await self._leaders.offsets(
                p.stream_id
            )
            if p.read_committed:
                a.last_stable_offset = await self._leaders.stable_offset(p.stream_id)
            return 0, 0
        if p.read_committed:
            res = await self._leaders.read_index(p.stream_id, p.offset, max(budget, 1), True)
            a.aborted_transactions = res.aborted
        else:
            res = await self._leaders.read_index(p.stream_id, p.offset, max(budget, 1))
        a.error = res.error
        a.high_watermark, a.log_start_offset = res.high_watermark, res.log_start_offset
        a.leader_epoch, a.last_stable_offset = res.leader_epoch, res.last_stable_offset
        if res.error != ErrorCode.none or not res.entries:
            return 0, 0
        entries = list(res.entries)
        # Beyond the first batch of the whole answer, stay within the limits: whole WAL
        # entries (one batch each); a chunk that does not fit is read and cut at its
        # batches below.
        if total > 0 or p.max_bytes < entries[0].length:
            kept: list[IndexEntry] = []
            size = 0
            for e in entries:
                if size + e.length > budget and (kept or total > 0):
                    if is_stream_key(e.object_key):
                        kept.append(e)
                    break
                kept.append(e)
                size += e.length
            entries = kept
        if not entries:
            return 0, 0
        with io_class(self.read_class(entries[0])):
            blobs, gets = await self._reader.read_prefix(
                entries, max(gets_left, 0 if total else 1), fetch=True
            )
        if not blobs:
            return 0, gets  # this answer's GETs are spent: the client asks again from here
        a.records = records_for_fetch(entries, blobs, p.offset, budget, total, a.leader_epoch)
        return len(a.records), gets

    # -- offsets -----------------------------------------------------------------
    async def _stream(self, topic: str, partition: int) -> tuple[int, TopicInfo] | None:
        info = await self._catalog.lookup(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        return info.partitions[partition].stream_id, info

    async def list_offset(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        *,
        max_timestamp_allowed: bool,
        read_committed: bool = False,
    ) -> OffsetAnswer:
        found = await self._stream(topic, partition)
        if found is None:
            return OffsetAnswer(ErrorCode.unknown_topic_or_partition)
        sid, info = found
        limit = self._catalog.rules(info).produce.max_message_bytes
        try:
            answer = await self._by_time(sid, timestamp, limit, max_timestamp_allowed)
            if not read_committed or timestamp == EARLIEST or answer.error != ErrorCode.none:
                return answer
            # Kafka's lastFetchableOffset under read_committed: the last stable offset is
            # the latest, and an offset found at or past it is no answer.
            stable = await self._leaders.stable_offset(sid)
            if timestamp == LATEST:
                return OffsetAnswer(ErrorCode.none, -1, stable, answer.leader_epoch)
            if answer.offset >= stable:
                return OffsetAnswer(ErrorCode.none, -1, -1, -1)
            return answer
        except (UnknownStream, LeaderUnavailable) as exc:
            return OffsetAnswer(partition_error(exc))
        except CorruptBatch as exc:
            # Produce stores compressed bodies unopened: one that cannot be read within
            # the limits fails this lookup, never the node.
            log.warning("ListOffsets of %s-%d: %s", topic, partition, exc)
            return OffsetAnswer(ErrorCode.corrupt_message)
        except STORE_FAILURES as exc:
            log.warning("ListOffsets of %s-%d: %r", topic, partition, exc)
            return OffsetAnswer(ErrorCode.kafka_storage_error)

    async def _records(self, entry: IndexEntry, max_message_bytes: int) -> list[Record]:
        with io_class(self.read_class(entry)):
            (blob,) = await self._reader.read([entry], fetch=True, readahead=False)
        if is_stream_key(entry.object_key):  # a chunk: its batches' offsets are final
            return decode_records(blob, max_message_bytes)
        buf = bytearray(blob)
        patch_batch(buf, 0, entry.base_offset, 0)
        return decode_records(bytes(buf), max_message_bytes)

    async def _by_time(
        self, stream_id: int, ts: int, max_message_bytes: int, max_timestamp_allowed: bool
    ) -> OffsetAnswer:
        leaders = self._leaders
        start, hwm, epoch = await leaders.offsets(stream_id)
        if ts == LATEST:
            return OffsetAnswer(ErrorCode.none, -1, hwm, epoch)
        if ts == EARLIEST:
            return OffsetAnswer(ErrorCode.none, -1, start, epoch)
        if ts == MAX_TIMESTAMP:
            if not max_timestamp_allowed:
                return OffsetAnswer(ErrorCode.unsupported_version, -1, -1, epoch)
            entry = await leaders.max_timestamp_entry(stream_id)
            if entry is None:
                return OffsetAnswer(ErrorCode.none, -1, -1, epoch)
            records = await self._records(entry, max_message_bytes)
            best = max(records, key=lambda r: (r.timestamp, -r.offset))
            return OffsetAnswer(ErrorCode.none, best.timestamp, best.offset, epoch)
        if ts < 0:
            return OffsetAnswer(ErrorCode.invalid_request, -1, -1, epoch)
        for entry in await leaders.entries_from_timestamp(stream_id, ts):
            for r in await self._records(entry, max_message_bytes):
                if r.timestamp >= ts and r.offset >= start:
                    return OffsetAnswer(ErrorCode.none, r.timestamp, r.offset, epoch)
        # No record at or after the time: Kafka answers no offset and no epoch (-1), and
        # its admin client then reports an empty leader epoch.
        return OffsetAnswer(ErrorCode.none, -1, -1, -1)

    async def legacy_offsets(
        self, topic: str, partition: int, timestamp: int, max_num: int
    ) -> OffsetAnswer:
        found = await self._stream(topic, partition)
        if found is None:
            return OffsetAnswer(ErrorCode.unknown_topic_or_partition)
        if timestamp < EARLIEST:  # Kafka 3.9: v0 knows only latest and earliest of them
            return OffsetAnswer(ErrorCode.unsupported_version)
        if max_num < 0:
            return OffsetAnswer(ErrorCode.invalid_request)
        sid, _ = found
        try:
            start, hwm, _ = await self._leaders.offsets(sid)
            newest = await self._leaders.max_timestamp_entry(sid) if hwm > start else None
        except (UnknownStream, LeaderUnavailable) as exc:
            return OffsetAnswer(partition_error(exc))
        newest_ms = newest.max_timestamp if newest is not None else -1
        offsets = legacy_offsets(start, hwm, newest_ms, self._clock.wall_ms(), timestamp, max_num)
        return OffsetAnswer(ErrorCode.none, offsets=tuple(offsets))

    async def epoch_end(
        self, topic: str, partition: int, current_leader_epoch: int, epoch: int
    ) -> OffsetAnswer:
        found = await self._stream(topic, partition)
        if found is None:
            return OffsetAnswer(ErrorCode.unknown_topic_or_partition)
        sid, _ = found
        try:
            _, hwm, current = await self._leaders.offsets(sid)
        except (UnknownStream, LeaderUnavailable) as exc:
            return OffsetAnswer(partition_error(exc))
        if current_leader_epoch >= 0 and current_leader_epoch != current:
            # The client's metadata is older (or newer) than the leader's epoch: as Kafka,
            # fence it so that it refreshes metadata and asks again.
            if current_leader_epoch < current:
                return OffsetAnswer(ErrorCode.fenced_leader_epoch)
            return OffsetAnswer(ErrorCode.unknown_leader_epoch)
        if epoch == current:
            return OffsetAnswer(ErrorCode.none, offset=hwm, leader_epoch=current)
        if epoch < 0 or epoch > current:
            return OffsetAnswer(ErrorCode.none)
        ended = await self._epochs.epoch_end_offset(sid, epoch)
        if ended is None:
            # A store made before epochs were recorded: nothing was ever truncated, so the
            # epoch's records all lie below the high watermark.
            return OffsetAnswer(ErrorCode.none, offset=hwm, leader_epoch=epoch)
        return OffsetAnswer(ErrorCode.none, offset=ended[1], leader_epoch=ended[0])


def records_for_fetch(
    entries: Sequence[IndexEntry],
    blobs: Sequence[bytes],
    offset: int,
    budget: int,
    total: int,
    leader_epoch: int,
) -> bytes:
    """A partition's records for a Fetch from `offset`: the batches of `blobs` (the bytes
    of `entries`, a prefix of them), base offsets and partition leader epochs patched,
    within `budget` at batch boundaries (the first batch of the whole answer, when
    `total` is 0, whatever its size, as Kafka). A WAL entry is one batch, stored with
    the producer's base offset; a chunk's batches have their final offsets, and those
    wholly below `offset` are left out."""
    out = bytearray()
    for e, blob in zip(entries, blobs, strict=False):
        if not is_stream_key(e.object_key):
            if len(out) + len(blob) > budget and (out or total > 0):
                break
            pos = len(out)
            out += blob
            patch_batch(out, pos, e.base_offset, leader_epoch)
            continue
        view = memoryview(blob)
        for at, h in iter_batches(view):
            if h.base_offset + h.last_offset_delta < offset:
                continue
            if len(out) + h.size > budget and (out or total > 0):
                return bytes(out)
            pos = len(out)
            out += view[at : at + h.size]
            patch_batch(out, pos, h.base_offset, leader_epoch)
    return bytes(out)


def legacy_offsets(
    start: int, hwm: int, newest_ms: int, now_ms: int, timestamp: int, max_num: int
) -> list[int]:
    """ListOffsets v0's answer for a partition holding [start, hwm) whose newest record
    has timestamp `newest_ms`: Kafka's segment walk (UnifiedLog.legacyFetchOffsetsBefore)
    over one segment."""
    points = [(start, newest_ms)]  # (offset, time it was last written)
    if hwm > start:  # Kafka adds the log end only when the last segment has data
        points.append((hwm, now_ms))
    if timestamp == LATEST:
        first = len(points) - 1
    elif timestamp == EARLIEST:
        first = 0
    else:
        first = max((i for i, (_, t) in enumerate(points) if t <= timestamp), default=-1)
    return [points[i][0] for i in range(first, first - min(max_num, first + 1), -1)]
