"""ListOffsets (key 2), v0-8: earliest (-2), latest (-1), max timestamp (-3), by timestamp.

By timestamp: the leader's index finds the first stored batch whose max
timestamp reaches the target; that batch is read and decoded (the only place
a batch is decompressed) to find the exact first record at or after it, as
Kafka's time index does. Max timestamp likewise returns the exact record.

v0 answers a list of up to `max_num_offsets` offsets, newest first, computed
as Kafka 3.9 computes it (`UnifiedLog.legacyFetchOffsetsBefore`) from a
partition's segments: each segment's base offset stamped with the time it was
last written, then the log end stamped "now". A zonegate partition is one
segment here, last written at its newest record's timestamp: latest answers
[high watermark, log start], earliest [log start], a timestamp the offsets
whose stamps are at or before it (none before the newest record, the log
start from then on, the high watermark too once the time is not in the past).
Timestamps below -2 get UNSUPPORTED_VERSION and a negative `max_num_offsets`
INVALID_REQUEST.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.grpc_client import LeaderUnavailable
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls, partition_error
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.records.batch import CorruptBatch, patch_batch
from zonegate.records.decode import Record, decode_records
from zonegate.services.topic_configs import effective
from zonegate.storage.index import IndexEntry, UnknownStream

log = logging.getLogger(__name__)
API_KEY = 2
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


async def _records(ctx: RequestContext, entry: IndexEntry, max_message_bytes: int) -> list[Record]:
    (blob,) = await ctx.node.reader.read([entry])
    buf = bytearray(blob)
    patch_batch(buf, 0, entry.base_offset, 0)
    return decode_records(bytes(buf), max_message_bytes)


async def _lookup(
    ctx: RequestContext, stream_id: int, ts: int, max_message_bytes: int
) -> tuple[ErrorCode, int, int, int]:
    """(error, timestamp, offset, leader epoch) for one partition."""
    leader = ctx.node.leader
    start, hwm, epoch = await leader.offsets(stream_id)
    if ts == LATEST:
        return ErrorCode.none, -1, hwm, epoch
    if ts == EARLIEST:
        return ErrorCode.none, -1, start, epoch
    if ts == MAX_TIMESTAMP:
        if ctx.api_version < 7:
            return ErrorCode.unsupported_version, -1, -1, epoch
        entry = await leader.max_timestamp_entry(stream_id)
        if entry is None:
            return ErrorCode.none, -1, -1, epoch
        records = await _records(ctx, entry, max_message_bytes)
        best = max(records, key=lambda r: (r.timestamp, -r.offset))
        return ErrorCode.none, best.timestamp, best.offset, epoch
    if ts < 0:
        return ErrorCode.invalid_request, -1, -1, epoch
    for entry in await leader.entries_from_timestamp(stream_id, ts):
        for r in await _records(ctx, entry, max_message_bytes):
            if r.timestamp >= ts and r.offset >= start:
                return ErrorCode.none, r.timestamp, r.offset, epoch
    return ErrorCode.none, -1, -1, epoch


def legacy_offsets(
    start: int, hwm: int, newest_ms: int, now_ms: int, timestamp: int, max_num: int
) -> list[int]:
    """ListOffsets v0's answer for a partition holding [start, hwm) whose newest record
    has timestamp `newest_ms`: Kafka's segment walk over one segment."""
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


async def _legacy_lookup(
    ctx: RequestContext, stream_id: int, ts: int, max_num: int
) -> tuple[ErrorCode, tuple[int, ...]]:
    if ts < EARLIEST:  # Kafka 3.9: v0 knows only latest and earliest of the special times
        return ErrorCode.unsupported_version, ()
    if max_num < 0:
        return ErrorCode.invalid_request, ()
    start, hwm, _ = await ctx.node.leader.offsets(stream_id)
    newest = await ctx.node.leader.max_timestamp_entry(stream_id) if hwm > start else None
    newest_ms = newest.max_timestamp if newest is not None else -1
    now_ms = int(time.time() * 1000)
    return ErrorCode.none, tuple(legacy_offsets(start, hwm, newest_ms, now_ms, ts, max_num))


async def _handle_v0(ctx: RequestContext, request: Any) -> Any:
    part_cls = cls(ctx, "ListOffsetsPartitionResponse")
    topics = []
    for t in request.topics:
        topic = await ctx.node.catalog.lookup(t.name)
        answers = []
        for p in t.partitions:
            offsets: tuple[int, ...] = ()
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                err = ErrorCode.unknown_topic_or_partition
            else:
                sid = topic.partitions[p.partition_index].stream_id
                try:
                    err, offsets = await _legacy_lookup(ctx, sid, p.timestamp, p.max_num_offsets)
                except (UnknownStream, LeaderUnavailable) as exc:
                    err = partition_error(exc)
            answers.append(
                part_cls(
                    partition_index=p.partition_index, error_code=err, old_style_offsets=offsets
                )
            )
        topics.append(cls(ctx, "ListOffsetsTopicResponse")(name=t.name, partitions=tuple(answers)))
    return cls(ctx, "ListOffsetsResponse")(topics=tuple(topics))


@REGISTRY.register(API_KEY, 0, 8)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version == 0:
        return await _handle_v0(ctx, request)
    node = ctx.node
    part_cls = cls(ctx, "ListOffsetsPartitionResponse")
    topics = []
    for t in request.topics:
        topic = await node.catalog.lookup(t.name)
        answers = []
        for p in t.partitions:
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                err, ts, off, epoch = ErrorCode.unknown_topic_or_partition, -1, -1, -1
            else:
                sid = topic.partitions[p.partition_index].stream_id
                limit = int(effective(topic.configs, "max.message.bytes"))
                try:
                    err, ts, off, epoch = await _lookup(ctx, sid, p.timestamp, limit)
                except (UnknownStream, LeaderUnavailable) as exc:
                    err, ts, off, epoch = partition_error(exc), -1, -1, -1
                except CorruptBatch as exc:
                    # Produce stores compressed bodies unopened: one that cannot be read
                    # within the limits fails this lookup, never the node.
                    log.warning("ListOffsets of %s-%d: %s", t.name, p.partition_index, exc)
                    err, ts, off, epoch = ErrorCode.corrupt_message, -1, -1, -1
            answers.append(
                make(
                    part_cls,
                    partition_index=p.partition_index,
                    error_code=err,
                    timestamp=ts,
                    offset=off,
                    leader_epoch=epoch,
                )
            )
        topics.append(
            make(cls(ctx, "ListOffsetsTopicResponse"), name=t.name, partitions=tuple(answers))
        )
    return make(cls(ctx, "ListOffsetsResponse"), throttle_time=NO_THROTTLE, topics=tuple(topics))
