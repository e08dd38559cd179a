"""DescribeConfigs (key 32), v0-4: topic configs (set or default) and this node's broker configs.

v0 has no synonyms and no config source, only `is_default`: true for a config
left at its default, as the field is defined and as Kafka up to 2.6 answered.
(Kafka 2.7-3.9 answer v0 with `is_default` always false, a side effect of their
move to generated messages, so their v0 answers call every config set.)
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import TOPIC_CONFIGS

API_KEY = 32
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


@REGISTRY.register(API_KEY, 0, 4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.services.cluster
    entry_cls = cls(ctx, "DescribeConfigsResourceResult")
    # v0 has no synonyms (nor the class for them); v1+ give one only when asked.
    synonym_cls = cls(ctx, "DescribeConfigsSynonym") if ctx.api_version >= 1 else None
    results = []
    for res in request.resources:
        code, message = ErrorCode.none, None
        values: dict[str, tuple[str, int]] = {}
        if res.resource_type == TOPIC:
            topic = await ctx.services.topics.lookup(res.resource_name)
            if topic is None:
                code = ErrorCode.unknown_topic_or_partition
                message = f"topic {res.resource_name!r} does not exist"
            else:
                for name, spec in TOPIC_CONFIGS.items():
                    if name in topic.configs:
                        values[name] = (topic.configs[name], DYNAMIC_TOPIC_CONFIG)
                    else:
                        values[name] = (spec.default, DEFAULT_CONFIG)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(cluster.node_id)):
                code = ErrorCode.invalid_request
                message = f"broker {res.resource_name!r} is not this node ({cluster.node_id})"
            else:
                values = {
                    k: (v, STATIC_BROKER_CONFIG) for k, v in cluster.broker_configs().items()
                }
        else:
            code = ErrorCode.invalid_request
            message = f"resource type {res.resource_type} is not supported"
        keys = res.configuration_keys
        if keys is not None:
            values = {k: v for k, v in values.items() if k in keys}
        configs = tuple(
            make(
                entry_cls,
                name=name,
                value=value,
                read_only=res.resource_type == BROKER,
                config_source=source,
                is_default=source == DEFAULT_CONFIG,
                is_sensitive=False,
                synonyms=(make(synonym_cls, name=name, value=value, source=source),)
                if synonym_cls is not None and getattr(request, "include_synonyms", False)
                else (),
                config_type=0,
                documentation=None,
            )
            for name, (value, source) in sorted(values.items())
        )
        results.append(
            make(
                cls(ctx, "DescribeConfigsResult"),
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=configs if code == ErrorCode.none else (),
            )
        )
    return make(
        cls(ctx, "DescribeConfigsResponse"), throttle_time=NO_THROTTLE, results=tuple(results)
    )
