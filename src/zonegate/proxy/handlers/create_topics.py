"""CreateTopics (key 19), v0-7 (v0 has no validate_only; v0-1 answers carry no throttle time).

Any replication factor of at least 1 (or -1, the default) is accepted: every
partition's data lives in the object store, whose own replication is what
keeps it, so the factor asks for nothing we would not do anyway. Manual
replica assignments are accepted for their partition count only. Unknown
topic configs and bad values get INVALID_CONFIG naming the config. Each
partition counts against the client's controller_mutation_rate quota. A topic
may have any number of partitions, but one request may make at most 10,000 in
all, as Kafka's controller: above that every topic of the request gets
POLICY_VIOLATION (services/partition_limits.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorize_cluster, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, THROTTLED, cls, mutation_allowed
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import (
    AclOperation,
    InvalidConfig,
    InvalidTopic,
    TopicExists,
    check_topic_name,
    validate_topic_configs,
)
from zonegate.services.partition_limits import (
    TOO_MANY_TO_CREATE,
    requested_partitions,
    too_many,
)

API_KEY = 19
_ZERO = uuid.UUID(int=0)


@REGISTRY.register(API_KEY, 0, 7)
async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = ctx.services.topics
    result_cls = cls(ctx, "CreatableTopicResult")
    results = []
    seen: set[str] = set()
    # As Kafka's KafkaApis: CREATE on the cluster, or else on each topic; the configs
    # are shown only with DESCRIBE_CONFIGS on the topic.
    creatable = (
        {t.name for t in request.topics}
        if authorize_cluster(ctx, AclOperation.CREATE, log_denied=False)
        else authorized_by_name(ctx, AclOperation.CREATE, TOPIC, request.topics, lambda t: t.name)
    )
    configs_shown = authorized_by_name(
        ctx,
        AclOperation.DESCRIBE_CONFIGS,
        TOPIC,
        request.topics,
        lambda t: t.name,
        log_denied=False,
    )
    # Kafka's controller counts the topics that reach it: each name once, if authorized.
    counted: dict[str, int] = {}
    for t in request.topics:
        if t.name in creatable and t.name not in counted:
            counted[t.name] = len(t.assignments) if t.assignments else t.num_partitions
    over = too_many(requested_partitions(counted.values(), topics.default_partitions))
    for t in request.topics:
        code, message, info = ErrorCode.none, None, None
        partitions = t.num_partitions
        if t.assignments:
            partitions = len(t.assignments)
        if partitions == -1:
            partitions = topics.default_partitions
        configs = {c.name: c.value for c in t.configs}
        try:
            if t.name in seen:
                raise _Fail(ErrorCode.invalid_request, f"topic {t.name!r} named twice")
            seen.add(t.name)
            if t.name not in creatable:
                raise _Fail(ErrorCode.topic_authorization_failed, "Authorization failed.")
            if over:
                raise _Fail(ErrorCode.policy_violation, TOO_MANY_TO_CREATE)
            check_topic_name(t.name)
            if t.replication_factor == 0 or t.replication_factor < -1:
                raise _Fail(
                    ErrorCode.invalid_replication_factor,
                    f"replication factor {t.replication_factor} must be at least 1",
                )
            if partitions < 1:
                raise _Fail(ErrorCode.invalid_partitions, f"{partitions} partitions is not >= 1")
            validate_topic_configs(configs)
            if topics.get(t.name) is not None:
                raise _Fail(ErrorCode.topic_already_exists, f"topic {t.name!r} already exists")
            if not getattr(request, "validate_only", False):
                if not mutation_allowed(ctx, partitions, strict_since=6):
                    raise _Fail(ErrorCode.throttling_quota_exceeded, THROTTLED)
                info = await topics.create(t.name, partitions, configs)
        except _Fail as exc:
            code, message = exc.code, exc.message
        except InvalidTopic as exc:
            code, message = ErrorCode.invalid_topic_exception, str(exc)
        except InvalidConfig as exc:
            code, message = ErrorCode.invalid_config, str(exc)
        except TopicExists as exc:
            code, message = ErrorCode.topic_already_exists, str(exc)
        except ValueError as exc:
            code, message = ErrorCode.invalid_partitions, str(exc)
        ok = code == ErrorCode.none
        results.append(
            make(
                result_cls,
                name=t.name,
                topic_id=info.topic_id if info is not None else _ZERO,
                error_code=code,
                error_message=message,
                topic_config_error_code=(
                    ErrorCode.none
                    if t.name in configs_shown
                    else ErrorCode.topic_authorization_failed
                ),
                num_partitions=partitions if ok else -1,
                replication_factor=(1 if t.replication_factor == -1 else t.replication_factor)
                if ok
                else -1,
                configs=(),
            )
        )
    return make(cls(ctx, "CreateTopicsResponse"), throttle_time=NO_THROTTLE, topics=tuple(results))


class _Fail(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
