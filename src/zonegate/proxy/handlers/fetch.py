"""Fetch (key 1), v4-12: the read path (services/read_path.py), then the answer.

Limits are Kafka's: `max_bytes` for the answer and `partition_max_bytes` per
partition, but the first batch of the answer is always returned whole so that
a consumer can make progress; long polls wait up to `max_wait_ms` for
`min_bytes`. Fetch sessions (KIP-227) are not kept: every answer has session
id 0, which clients take as "send full requests". A consumer over its
consumer_byte_rate quota gets an empty answer and a throttle time, as Kafka's. A
topic the principal may not READ gets TOPIC_AUTHORIZATION_FAILED on each of its
partitions and no bytes, as Kafka's KafkaApis.handleFetchRequest. Every answer
carries the last stable offset; with isolation_level 1 (read_committed) nothing at or
past it is answered, and the aborted transactions of the range are named so that the
client skips their records (docs/transactions.md).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, FetchedPartition, FetchPartition

API_KEY = 1
READ_COMMITTED = 1  # isolation_level (KIP-98): 0 read_uncommitted, 1 read_committed


@REGISTRY.register(API_KEY, 4, 12)
async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = authorized_by_name(ctx, AclOperation.READ, TOPIC, request.topics, lambda t: t.topic)
    wanted = [
        FetchPartition(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
        for t in request.topics
        if t.topic in allowed
        for p in t.partitions
    ]
    refused = [
        FetchedPartition(t.topic, p.partition, ErrorCode.topic_authorization_failed)
        for t in request.topics
        if t.topic not in allowed
        for p in t.partitions
    ]
    # With nothing allowed, Kafka answers at once rather than waiting out max_wait.
    parts = (
        await ctx.services.fetch.fetch(
            wanted,
            max_bytes=getattr(request, "max_bytes", 0x7FFFFFFF),
            min_bytes=request.min_bytes,
            max_wait_s=request.max_wait.total_seconds(),
            read_committed=request.isolation_level == READ_COMMITTED,
        )
        if wanted
        else []
    )
    size = sum(len(p.records) for p in parts)
    throttle = ctx.services.quotas.record_fetch(ctx.principal, ctx.client_id or "", size)
    if throttle > 0:
        # Over consumer_byte_rate: as Kafka, an empty answer with the throttle time;
        # the consumer asks again from the same offsets once it has waited.
        ctx.throttle.at_least(throttle)
        parts = []
    return _answer(ctx, parts + refused)


def _answer(ctx: RequestContext, parts: list[FetchedPartition]) -> Any:
    part_cls = cls(ctx, "PartitionData")
    aborted_cls = cls(ctx, "AbortedTransaction")
    topic_cls = cls(ctx, "FetchableTopicResponse")
    by_topic: dict[str, list[Any]] = {}
    for p in parts:
        by_topic.setdefault(p.topic, []).append(
            make(
                part_cls,
                partition_index=p.partition,
                error_code=p.error,
                high_watermark=p.high_watermark,
                last_stable_offset=p.high_watermark
                if p.last_stable_offset < 0
                else p.last_stable_offset,
                log_start_offset=p.log_start_offset,
                diverging_epoch=make(cls(ctx, "EpochEndOffset")) if ctx.api_version >= 12 else None,
                current_leader=make(cls(ctx, "LeaderIdAndEpoch"))
                if ctx.api_version >= 12
                else None,
                snapshot_id=make(cls(ctx, "SnapshotId")) if ctx.api_version >= 12 else None,
                aborted_transactions=tuple(
                    make(aborted_cls, producer_id=pid, first_offset=first)
                    for pid, first in p.aborted_transactions
                ),
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
