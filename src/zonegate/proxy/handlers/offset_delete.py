"""OffsetDelete (key 47), v0: drops a group's committed offsets of topics it no longer
consumes (GROUP_SUBSCRIBED_TO_TOPIC for a topic a member still subscribes to)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, TOPIC, authorize, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import topic_partition_errors
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 47


@REGISTRY.register(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    errors: list[ErrorCode] = []
    if not authorize(ctx, AclOperation.DELETE, GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        # As Kafka: READ on each topic; a refused one fails its partitions alone.
        allowed = authorized_by_name(
            ctx, AclOperation.READ, TOPIC, request.topics, lambda t: t.name
        )
        error, deleted = await ctx.services.groups.delete_offsets(
            request.group_id, [tp for tp in wanted if tp[0] in allowed]
        )
        done = iter(deleted)
        errors = [
            next(done, ErrorCode.none) if topic in allowed else ErrorCode.topic_authorization_failed
            for topic, _ in wanted
        ]
    topics = (
        topic_partition_errors(ctx, request.topics, errors, "OffsetDeleteResponse")
        if error is ErrorCode.none
        else ()
    )
    return make(
        cls(ctx, "OffsetDeleteResponse"), error_code=error, throttle_time=NO_THROTTLE, topics=topics
    )
