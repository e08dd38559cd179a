"""CreatePartitions (key 37), v0-3: raise a topic's partition count (never lower it).

The partitions added count against the client's controller_mutation_rate quota.
A topic may grow to any count, but one request may add at most 10,000 partitions
in all, as Kafka's controller (its limit of records per operation): above that
every topic of the request gets POLICY_VIOLATION (services/partition_limits.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, THROTTLED, cls, mutation_allowed
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation
from zonegate.services.partition_limits import TOO_LARGE_BATCH, too_many

API_KEY = 37


@REGISTRY.register(API_KEY, 0, 3)
async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    allowed = {t.name for t in request.topics if authorize(ctx, AclOperation.ALTER, TOPIC, t.name)}
    added = 0
    for t in request.topics:
        topic = ctx.services.topics.get(t.name) if t.name in allowed else None
        if topic is not None:
            added += max(0, t.count - len(topic.partitions))
    over = too_many(added)
    for t in request.topics:
        code, message = ErrorCode.none, None
        try:
            if t.name not in allowed:
                raise _Refused("The topic authorization is failed.")
            if over:
                raise _TooLarge(TOO_LARGE_BATCH)
            topic = ctx.services.topics.get(t.name)
            more = t.count - len(topic.partitions) if topic is not None else 0
            if more > 0 and not request.validate_only:
                if not mutation_allowed(ctx, more, strict_since=3):
                    raise _Throttled(THROTTLED)
            await ctx.services.topics.add_partitions(
                t.name, t.count, validate_only=request.validate_only
            )
        except _Refused as exc:
            code, message = ErrorCode.topic_authorization_failed, str(exc)
        except _Throttled as exc:
            code, message = ErrorCode.throttling_quota_exceeded, str(exc)
        except _TooLarge as exc:
            code, message = ErrorCode.policy_violation, str(exc)
        except LookupError as exc:
            code, message = ErrorCode.unknown_topic_or_partition, str(exc)
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


class _Throttled(Exception):
    pass


class _Refused(Exception):
    pass


class _TooLarge(Exception):
    pass
