"""ListOffsets (key 2), v0-8: earliest (-2), latest (-1), max timestamp (-3), by timestamp.

By timestamp the read path (services/read_path.py) finds the exact first
record at or after the target, as Kafka's time index does; max timestamp
likewise returns the exact record. With isolation_level 1 (read_committed, v2+),
latest is the last stable offset and an offset found at or past it is no answer
(-1), as Kafka's lastFetchableOffset.

v0 answers a list of up to `max_num_offsets` offsets, newest first, computed
as Kafka 3.9 computes it (`UnifiedLog.legacyFetchOffsetsBefore`) from a
partition's segments: each segment's base offset stamped with the time it was
last written, then the log end stamped "now". A zonegate partition is one
segment here, last written at its newest record's timestamp: latest answers
[high watermark, log start], earliest [log start], a timestamp the offsets
whose stamps are at or before it (none before the newest record, the log
start from then on, the high watermark too once the time is not in the past).
Timestamps below -2 get UNSUPPORTED_VERSION and a negative `max_num_offsets`
INVALID_REQUEST. A topic the principal may not DESCRIBE gets
TOPIC_AUTHORIZATION_FAILED on each partition, as Kafka's KafkaApis.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, OffsetAnswer

API_KEY = 2


@REGISTRY.register(API_KEY, 0, 8)
async def handle(ctx: RequestContext, request: Any) -> Any:
    part_cls = cls(ctx, "ListOffsetsPartitionResponse")
    topics = []
    allowed = authorized_by_name(
        ctx, AclOperation.DESCRIBE, TOPIC, request.topics, lambda t: t.name
    )
    refused = OffsetAnswer(ErrorCode.topic_authorization_failed)
    # isolation_level (v2+): 1 is read_committed (KIP-98)
    committed = getattr(request, "isolation_level", 0) == 1
    for t in request.topics:
        answers = []
        for p in t.partitions:
            a = await _answer(ctx, t.name, p, committed) if t.name in allowed else refused
            # Each version's fields only: v0 its list of offsets, v1+ the one offset.
            answers.append(
                make(
                    part_cls,
                    partition_index=p.partition_index,
                    error_code=a.error,
                    old_style_offsets=a.offsets,
                    timestamp=a.timestamp,
                    offset=a.offset,
                    leader_epoch=a.leader_epoch,
                )
            )
        topics.append(
            make(cls(ctx, "ListOffsetsTopicResponse"), name=t.name, partitions=tuple(answers))
        )
    return make(cls(ctx, "ListOffsetsResponse"), throttle_time=NO_THROTTLE, topics=tuple(topics))


async def _answer(ctx: RequestContext, topic: str, p: Any, committed: bool) -> OffsetAnswer:
    if ctx.api_version == 0:
        return await ctx.services.fetch.legacy_offsets(
            topic, p.partition_index, p.timestamp, p.max_num_offsets
        )
    return await ctx.services.fetch.list_offset(
        topic,
        p.partition_index,
        p.timestamp,
        max_timestamp_allowed=ctx.api_version >= 7,
        read_committed=committed,
    )
