"""DeleteTopics (key 20), v0-6: by name, or by topic id from v6.

Deletion drops the topic's index entries and bumps its partitions' leader
epochs in one transaction; the data objects are reclaimed by object GC. The
partitions deleted count against the client's controller_mutation_rate quota.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, THROTTLED, cls, mutation_allowed
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 20
_ZERO = uuid.UUID(int=0)


@REGISTRY.register(API_KEY, 0, 6)
async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = ctx.services.topics
    result_cls = cls(ctx, "DeletableTopicResult")
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        by_id = name is None and topic_id is not None
        if name is None and topic_id is not None:
            t = topics.by_id(topic_id)
            name = t.name if t is not None else None
            missing = ErrorCode.unknown_topic_id
        else:
            missing = ErrorCode.unknown_topic_or_partition
        if by_id and name is not None and not authorize(ctx, AclOperation.DESCRIBE, TOPIC, name):
            # As Kafka: the name stays unsaid; the id is no secret.
            results.append(_refused(result_cls, None, topic_id))
            continue
        if name is not None and not authorize(ctx, AclOperation.DELETE, TOPIC, name):
            results.append(_refused(result_cls, name, topic_id))
            continue
        known = topics.get(name) if name is not None else None
        if known is not None and not mutation_allowed(ctx, len(known.partitions), strict_since=5):
            results.append(
                make(
                    result_cls,
                    name=name,
                    topic_id=known.topic_id,
                    error_code=ErrorCode.throttling_quota_exceeded,
                    error_message=THROTTLED,
                )
            )
            continue
        deleted = await topics.delete(name) if name is not None else None
        results.append(
            make(
                result_cls,
                name=name,
                topic_id=deleted.topic_id if deleted else (topic_id or _ZERO),
                error_code=ErrorCode.none if deleted else missing,
                error_message=None if deleted else f"topic {name or topic_id} does not exist",
            )
        )
    return make(
        cls(ctx, "DeleteTopicsResponse"), throttle_time=NO_THROTTLE, responses=tuple(results)
    )


def _refused(result_cls: type[Any], name: str | None, topic_id: Any) -> Any:
    return make(
        result_cls,
        name=name,
        topic_id=topic_id or _ZERO,
        error_code=ErrorCode.topic_authorization_failed,
        error_message=None,
    )
