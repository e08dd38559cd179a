"""CreatePartitions (key 37), v0-3: raise a topic's partition count (never lower it)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

API_KEY = 37


@REGISTRY.register(API_KEY, 0, 3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    node = ctx.node
    await node.catalog.refresh()  # counts another node changed since the last refresh
    results = []
    for t in request.topics:
        code, message = ErrorCode.none, None
        topic = node.catalog.get(t.name)
        if topic is None:
            code, message = ErrorCode.unknown_topic_or_partition, f"topic {t.name!r} does not exist"
        elif t.count <= len(topic.partitions):
            code = ErrorCode.invalid_partitions
            message = (
                f"topic {t.name!r} has {len(topic.partitions)} partitions; "
                f"the new count {t.count} must be larger"
            )
        elif not request.validate_only:
            try:
                await node.catalog.add_partitions(t.name, t.count)
            except ValueError as exc:
                code, message = ErrorCode.invalid_partitions, str(exc)
        results.append(
            make(
                cls(ctx, "CreatePartitionsTopicResult"),
                name=t.name,
                error_code=code,
                error_message=message,
            )
        )
    return make(
        cls(ctx, "CreatePartitionsResponse"), throttle_time=NO_THROTTLE, results=tuple(results)
    )
