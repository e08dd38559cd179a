"""OffsetDelete (key 47), v0: drops a group's committed offsets of topics it no longer
consumes (GROUP_SUBSCRIBED_TO_TOPIC for a topic a member still subscribes to)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import topic_partition_errors
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

API_KEY = 47


@REGISTRY.register(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    errors: list[ErrorCode] = []
    if not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        error, errors = await ctx.services.groups.delete_offsets(request.group_id, wanted)
    topics = (
        topic_partition_errors(ctx, request.topics, errors, "OffsetDeleteResponse")
        if error is ErrorCode.none
        else ()
    )
    return make(
        cls(ctx, "OffsetDeleteResponse"), error_code=error, throttle_time=NO_THROTTLE, topics=topics
    )
