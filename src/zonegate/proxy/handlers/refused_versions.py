"""Produce v0-2 and Fetch v0-3: answered UNSUPPORTED_VERSION for every partition.

These versions carry message formats v0 and v1, which zonegate does not store
(it keeps format v2 batches as received and never converts them), so they are
not served and not advertised. Kafka 3.9 served them; Kafka 4.0 closes the
connection on them. A client that sends them anyway (kafka-python with
`api_version` pinned below 0.11, for one) gets Kafka's UNSUPPORTED_VERSION per
partition instead, which it reports as such rather than retrying a dropped
connection. A produce request with acks=0 gets no answer, as any acks=0
produce; the node logs that it dropped the data.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

log = logging.getLogger(__name__)
PRODUCE, FETCH = 0, 1


@REGISTRY.refuse(PRODUCE, 0, 2)
async def refuse_produce(ctx: RequestContext, request: Any) -> Any:
    if request.acks == 0:
        log.warning(
            "dropped a Produce v%d request (acks=0) from %s (client id %r): message format "
            "v0/v1 is not supported, Produce v3+ is",
            ctx.api_version,
            ctx.client.host,
            ctx.client_id,
        )
        return None
    part_cls = cls(ctx, "PartitionProduceResponse")
    return make(
        cls(ctx, "ProduceResponse"),
        throttle_time=NO_THROTTLE,
        responses=tuple(
            make(
                cls(ctx, "TopicProduceResponse"),
                name=t.name,
                partition_responses=tuple(
                    make(
                        part_cls,
                        index=p.index,
                        error_code=ErrorCode.unsupported_version,
                        base_offset=-1,
                        log_append_time=None,
                    )
                    for p in t.partition_data
                ),
            )
            for t in request.topic_data
        ),
    )


@REGISTRY.refuse(FETCH, 0, 3)
async def refuse_fetch(ctx: RequestContext, request: Any) -> Any:
    part_cls = cls(ctx, "PartitionData")
    return make(
        cls(ctx, "FetchResponse"),
        throttle_time=NO_THROTTLE,
        responses=tuple(
            make(
                cls(ctx, "FetchableTopicResponse"),
                topic=t.topic,
                partitions=tuple(
                    make(
                        part_cls,
                        partition_index=p.partition,
                        error_code=ErrorCode.unsupported_version,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        records=None,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )
