"""DescribeConfigs (key 32), v0-4: topic configs and broker configs, with their sources.

A topic config's value is the topic's own (DYNAMIC_TOPIC_CONFIG), else the
answering node's own default set by AlterConfigs on the broker resource named
by its id (DYNAMIC_BROKER_CONFIG, under the broker name: `log.retention.ms`),
else the cluster-wide default set on the broker resource ""
(DYNAMIC_DEFAULT_BROKER_CONFIG), else Kafka's (DEFAULT_CONFIG); synonyms (v1+,
when asked) list that chain. A broker shows its static settings (read-only)
and the topic defaults; the cluster-wide default resource "" shows only the
defaults set on it, as Kafka's does.

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
from zonegate.services.api import BROKER_DEFAULT_NAMES, TOPIC_CONFIGS

API_KEY = 32
TOPIC, BROKER = 2, 4
# Kafka's ConfigSource values.
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5

# name -> (value, source, [(synonym name, value, source)...] most specific first)
Described = dict[str, tuple[str, int, list[tuple[str, str, int]]]]


def _default_chain(
    name: str, layers: list[tuple[dict[str, str], int]]
) -> list[tuple[str, str, int]]:
    """The broker-named synonyms of topic config `name`, most specific first."""
    broker_name = BROKER_DEFAULT_NAMES[name]
    chain = [(broker_name, values[name], source) for values, source in layers if name in values]
    chain.append((broker_name, TOPIC_CONFIGS[name].default, DEFAULT_CONFIG))
    return chain


def _topic_values(own: dict[str, str], layers: list[tuple[dict[str, str], int]]) -> Described:
    out: Described = {}
    for name in TOPIC_CONFIGS:
        chain = _default_chain(name, layers)
        if name in own:
            chain.insert(0, (name, own[name], DYNAMIC_TOPIC_CONFIG))
        out[name] = (chain[0][1], chain[0][2], chain)
    return out


def _broker_values(static: dict[str, str], layers: list[tuple[dict[str, str], int]]) -> Described:
    out: Described = {
        k: (v, STATIC_BROKER_CONFIG, [(k, v, STATIC_BROKER_CONFIG)]) for k, v in static.items()
    }
    for name in TOPIC_CONFIGS:
        chain = _default_chain(name, layers)
        out[chain[0][0]] = (chain[0][1], chain[0][2], chain)
    return out


@REGISTRY.register(API_KEY, 0, 4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.services.cluster
    topics = ctx.services.topics
    entry_cls = cls(ctx, "DescribeConfigsResourceResult")
    # v0 has no synonyms (nor the class for them); v1+ give them only when asked.
    synonym_cls = cls(ctx, "DescribeConfigsSynonym") if ctx.api_version >= 1 else None
    with_synonyms = synonym_cls is not None and getattr(request, "include_synonyms", False)
    layers = [
        (topics.defaults_at(topics.local_scope), DYNAMIC_BROKER_CONFIG),
        (topics.defaults_at(""), DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
    results = []
    for res in request.resources:
        code, message = ErrorCode.none, None
        values: Described = {}
        if res.resource_type == TOPIC:
            topic = await topics.lookup(res.resource_name)
            if topic is None:
                code = ErrorCode.unknown_topic_or_partition
                message = f"topic {res.resource_name!r} does not exist"
            else:
                values = _topic_values(topic.configs, layers)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(cluster.node_id)):
                code = ErrorCode.invalid_request
                message = f"broker {res.resource_name!r} is not this node ({cluster.node_id})"
            elif res.resource_name == "":
                # The cluster-wide default resource shows only the defaults set on it, as
                # Kafka's does (its dynamic default configs).
                values = {
                    k: v
                    for k, v in _broker_values({}, layers[1:]).items()
                    if v[1] == DYNAMIC_DEFAULT_BROKER_CONFIG
                }
            else:
                values = _broker_values(cluster.broker_configs(), layers)
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
                read_only=source == STATIC_BROKER_CONFIG,
                config_source=source,
                is_default=source == DEFAULT_CONFIG,
                is_sensitive=False,
                synonyms=tuple(
                    make(synonym_cls, name=n, value=v, source=src) for n, v, src in chain
                )
                if with_synonyms and synonym_cls is not None
                else (),
                config_type=0,
                documentation=None,
            )
            for name, (value, source, chain) in sorted(values.items())
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
