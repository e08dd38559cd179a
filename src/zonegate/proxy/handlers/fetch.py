"""Fetch (key 1), v4-12: index from the leader, bytes from the log cache or object store.

Long polls wait on the leader's high-watermark changes (no polling) until
`min_bytes` are there or `max_wait_ms` passes. Each batch's base offset and
partition leader epoch are rewritten on the way out (the CRC does not cover
them); batches are never decompressed. Limits are Kafka's: `max_bytes` for the
answer and `partition_max_bytes` per partition, but the first batch of the
answer is always returned whole so that a consumer can make progress.
Each answer takes at most MAX_GETS_PER_FETCH object-store GETs (entries of one
object share a GET; storage/reader.py), however far behind the consumer is.
Fetch sessions (KIP-227) are not kept: every answer has session id 0, which
clients take as "send full requests".
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.grpc_client import LeaderUnavailable
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls, partition_error
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.records.batch import patch_batch
from zonegate.storage.index import IndexEntry, UnknownStream
from zonegate.storage.reader import MAX_GETS_PER_READ

API_KEY = 1
# Object-store GETs one Fetch answer may take however far behind its consumer is: a
# reader of thousands of small batches gets them over several answers, each cheap.
MAX_GETS_PER_FETCH = MAX_GETS_PER_READ


@dataclass(slots=True)
class _Part:
    topic: str
    index: int
    offset: int
    max_bytes: int
    stream_id: int = -1
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    log_start_offset: int = -1
    leader_epoch: int = 0
    records: bytes = b""
    entries: tuple[IndexEntry, ...] = field(default_factory=tuple)


@REGISTRY.register(API_KEY, 4, 12)
async def handle(ctx: RequestContext, request: Any) -> Any:
    node = ctx.node
    parts: list[_Part] = []
    for t in request.topics:
        topic = node.catalog.get(t.topic)
        for p in t.partitions:
            part = _Part(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
            if topic is None or not 0 <= p.partition < len(topic.partitions):
                part.error = ErrorCode.unknown_topic_or_partition
            else:
                part.stream_id = topic.partitions[p.partition].stream_id
            parts.append(part)

    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)
    deadline = time.monotonic() + request.max_wait.total_seconds()
    min_bytes = max(request.min_bytes, 1)
    while True:
        waits = []
        for p in parts:
            if p.stream_id >= 0 and p.error == ErrorCode.none:
                try:
                    waits.append(await node.leader.changed(p.stream_id))
                except (UnknownStream, LeaderUnavailable) as exc:
                    p.error = partition_error(exc)
        total = await _read_all(ctx, parts, max_bytes)
        remaining = deadline - time.monotonic()
        if (
            total >= min_bytes
            or remaining <= 0
            or not waits
            or any(p.error != ErrorCode.none for p in parts)
        ):
            break
        await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if time.monotonic() >= deadline:
            await _read_all(ctx, parts, max_bytes)
            break
    return _answer(ctx, parts)


async def _read_all(ctx: RequestContext, parts: list[_Part], max_bytes: int) -> int:
    node = ctx.node
    total = 0
    gets_left = MAX_GETS_PER_FETCH
    for p in parts:
        p.records = b""
        if p.stream_id < 0 or p.error != ErrorCode.none:
            continue
        try:
            read = await _read_one(ctx, p, max_bytes, total, gets_left)
        except (UnknownStream, LeaderUnavailable) as exc:
            p.error = partition_error(exc)
            continue
        total += read[0]
        gets_left -= read[1]
    node.reader.gets_per_fetch.observe(MAX_GETS_PER_FETCH - gets_left)
    return total


async def _read_one(
    ctx: RequestContext, p: _Part, max_bytes: int, total: int, gets_left: int
) -> tuple[int, int]:
    """Reads one partition into `p`: (bytes read, GETs taken)."""
    node = ctx.node
    budget = min(p.max_bytes, max(max_bytes - total, 0))
    if budget <= 0 and total > 0:
        lso, hwm, epoch = await node.leader.offsets(p.stream_id)
        p.high_watermark, p.log_start_offset, p.leader_epoch = hwm, lso, epoch
        return 0, 0
    res = await node.leader.read_index(p.stream_id, p.offset, max(budget, 1))
    p.error = res.error
    p.high_watermark, p.log_start_offset = res.high_watermark, res.log_start_offset
    p.leader_epoch = res.leader_epoch
    if res.error != ErrorCode.none or not res.entries:
        return 0, 0
    entries = list(res.entries)
    # Beyond the first batch of the whole answer, stay within the limits.
    if total > 0 or p.max_bytes < entries[0].length:
        kept: list[IndexEntry] = []
        size = 0
        for e in entries:
            if size + e.length > budget and (kept or total > 0):
                break
            kept.append(e)
            size += e.length
        entries = kept
    if not entries:
        return 0, 0
    blobs, gets = await node.reader.read_prefix(entries, max(gets_left, 0 if total else 1))
    if not blobs:
        return 0, gets  # this answer's GETs are spent: the client asks again from here
    entries = entries[: len(blobs)]
    buf = bytearray(b"".join(blobs))
    pos = 0
    for e, blob in zip(entries, blobs, strict=True):
        patch_batch(buf, pos, e.base_offset, p.leader_epoch)
        pos += len(blob)
    p.records = bytes(buf)
    return len(buf), gets


def _answer(ctx: RequestContext, parts: list[_Part]) -> Any:
    part_cls = cls(ctx, "PartitionData")
    topic_cls = cls(ctx, "FetchableTopicResponse")
    by_topic: dict[str, list[Any]] = {}
    for p in parts:
        by_topic.setdefault(p.topic, []).append(
            make(
                part_cls,
                partition_index=p.index,
                error_code=p.error,
                high_watermark=p.high_watermark,
                last_stable_offset=p.high_watermark,
                log_start_offset=p.log_start_offset,
                diverging_epoch=make(cls(ctx, "EpochEndOffset")) if ctx.api_version >= 12 else None,
                current_leader=make(cls(ctx, "LeaderIdAndEpoch"))
                if ctx.api_version >= 12
                else None,
                snapshot_id=make(cls(ctx, "SnapshotId")) if ctx.api_version >= 12 else None,
                aborted_transactions=(),
                preferred_read_replica=-1,
                records=p.records,
            )
        )
    return make(
        cls(ctx, "FetchResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            make(topic_cls, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )
