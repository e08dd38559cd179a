"""DeleteRecords (key 21), v0-2: moves partitions' log start offsets (the low watermark).

Each partition's leader moves its log start up to the offset asked (-1: the
high watermark) and drops the index entries wholly below it; object GC
reclaims what they alone referred to (docs/storage.md). An offset past the
high watermark is OFFSET_OUT_OF_RANGE; one below the log start changes
nothing. Consumers behind the new start get OFFSET_OUT_OF_RANGE and reset by
their policy, as with Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 21


@REGISTRY.register(API_KEY, 0, 2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    part_cls = cls(ctx, "DeleteRecordsPartitionResult")
    topics = []
    allowed = authorized_by_name(ctx, AclOperation.DELETE, TOPIC, request.topics, lambda t: t.name)
    for t in request.topics:
        answers = []
        for p in t.partitions:
            error, low = (
                await ctx.services.produce.delete_records(t.name, p.partition_index, p.offset)
                if t.name in allowed
                else (ErrorCode.topic_authorization_failed, -1)
            )
            answers.append(
                make(
                    part_cls, partition_index=p.partition_index, low_watermark=low, error_code=error
                )
            )
        topics.append(
            make(cls(ctx, "DeleteRecordsTopicResult"), name=t.name, partitions=tuple(answers))
        )
    return make(cls(ctx, "DeleteRecordsResponse"), throttle_time=NO_THROTTLE, topics=tuple(topics))
