"""DescribeConfigs (key 32), v0-4: topic, broker and group configs, with their sources.

A topic config's value is the topic's own (DYNAMIC_TOPIC_CONFIG), else the
answering node's own default set by AlterConfigs on the broker resource named
by its id (DYNAMIC_BROKER_CONFIG, under the broker name: `log.retention.ms`),
else the cluster-wide default set on the broker resource ""
(DYNAMIC_DEFAULT_BROKER_CONFIG), else the node's own setting where it has one
(STATIC_BROKER_CONFIG: `--log-segment-delete-delay-ms` for
`file.delete.delay.ms`), else Kafka's (DEFAULT_CONFIG); synonyms (v1+, when
asked) list that chain. Every topic config of Kafka 4.x is shown, those with no
effect here too (services/topic_configs.py). A broker shows its static settings
(read-only) and every config Kafka changes at run time, along the same chain; a
name Kafka does not know, set at run time, is shown as Kafka shows it: sensitive,
with no value. The cluster-wide default resource "" shows only the configs set
on it, as Kafka's does. A group (type 32) shows its own configs
(DYNAMIC_GROUP_CONFIG) over the broker's defaults, as Kafka 4.x does.

v0 has no synonyms and no config source, only `is_default`: true for a config
left at its default, as the field is defined and as Kafka up to 2.6 answered.
(Kafka 2.7-3.9 answer v0 with `is_default` always false, a side effect of their
move to generated messages, so their v0 answers call every config set.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import config_refusal
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import (
    BROKER_DEFAULT_NAMES,
    NULL_DEFAULT_BROKER_NAMES,
    TOPIC_CONFIGS,
    AclOperation,
)
from zonegate.services.broker_configs import (
    DYNAMIC_BROKER_CONFIGS,
    broker_config_def,
    shown_name,
    stored_name,
)
from zonegate.services.config_defs import ConfigDef
from zonegate.services.group_configs import BROKER_SYNONYMS, GROUP_CONFIGS

API_KEY = 32
TOPIC, BROKER, GROUP = 2, 4, 32
# Kafka's ConfigSource values.
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_GROUP_CONFIG = 4, 5, 8
# Kafka's ConfigType values (DescribeConfigs v3+).
CONFIG_TYPES = {
    "BOOLEAN": 1,
    "STRING": 2,
    "INT": 3,
    "SHORT": 4,
    "LONG": 5,
    "DOUBLE": 6,
    "LIST": 7,
    "CLASS": 8,
    "PASSWORD": 9,
}

Chain = list[tuple[str, str | None, int]]  # (synonym, value, source), most specific first
Layers = list[tuple[Mapping[str, str], int]]  # stored values by stored name, and their source


class Shown:
    """One config as DescribeConfigs answers it."""

    __slots__ = ("chain", "defn", "read_only", "source", "value")

    def __init__(self, chain: Chain, defn: ConfigDef | None, read_only: bool = False) -> None:
        # A synonym without a value (a default of null) is left out, as Kafka does.
        chain = [c for c in chain if c[1] is not None]
        self.chain = chain
        self.defn = defn
        self.read_only = read_only
        # An empty chain: a config with no synonym left at its default.
        self.value = chain[0][1] if chain else (defn.default if defn else None)
        self.source = chain[0][2] if chain else DEFAULT_CONFIG

    @property
    def sensitive(self) -> bool:
        # A name Kafka does not know may be a plugin's secret: Kafka hides it.
        return self.defn is None or self.defn.sensitive


def _broker_chain(
    stored: str, broker_name: str, layers: Layers, static: Mapping[str, str], defn: ConfigDef
) -> Chain:
    """The broker-level synonyms of a config stored as `stored`, most specific first:
    the dynamic layers, the node's own setting, Kafka's default."""
    chain: Chain = [
        (broker_name, values[stored], src) for values, src in layers if stored in values
    ]
    if broker_name in static and static[broker_name] != defn.default:
        chain.append((broker_name, static[broker_name], STATIC_BROKER_CONFIG))
    if broker_name not in NULL_DEFAULT_BROKER_NAMES:
        chain.append((broker_name, defn.default, DEFAULT_CONFIG))
    return chain


def _topic_values(
    own: Mapping[str, str], layers: Layers, static: Mapping[str, str]
) -> dict[str, Shown]:
    out: dict[str, Shown] = {}
    for name, defn in TOPIC_CONFIGS.items():
        broker_name = BROKER_DEFAULT_NAMES.get(name)
        chain = (
            [] if broker_name is None else _broker_chain(name, broker_name, layers, static, defn)
        )
        if name in own:
            chain.insert(0, (name, own[name], DYNAMIC_TOPIC_CONFIG))
        out[name] = Shown(chain, defn)
    return out


def _broker_values(static: Mapping[str, str], layers: Layers) -> dict[str, Shown]:
    out: dict[str, Shown] = {}
    for k, v in static.items():
        if broker_config_def(k) is None:  # a setting only a restart changes
            out[k] = Shown([(k, v, STATIC_BROKER_CONFIG)], ConfigDef("STRING", v), read_only=True)
    names = [BROKER_DEFAULT_NAMES[n] for n in TOPIC_CONFIGS if n in BROKER_DEFAULT_NAMES]
    for broker_name in [*names, *DYNAMIC_BROKER_CONFIGS]:
        defn = broker_config_def(broker_name)
        assert defn is not None
        stored = stored_name(broker_name)
        out[broker_name] = Shown(_broker_chain(stored, broker_name, layers, static, defn), defn)
    for values, src in layers:  # names Kafka does not know, set at run time
        for stored, v in values.items():
            name = shown_name(stored)
            if name not in out:
                out[name] = Shown([(name, v, src)], None)
    return out


def _group_values(own: Mapping[str, str], static: Mapping[str, str]) -> dict[str, Shown]:
    out: dict[str, Shown] = {}
    for name, defn in GROUP_CONFIGS.items():
        broker_name = BROKER_SYNONYMS.get(name, name)
        chain: Chain = []
        if name in own:
            chain.append((name, own[name], DYNAMIC_GROUP_CONFIG))
        if broker_name in static and static[broker_name] != defn.default:
            chain.append((broker_name, static[broker_name], STATIC_BROKER_CONFIG))
        chain.append((broker_name, defn.default, DEFAULT_CONFIG))
        out[name] = Shown(chain, defn)
    return out


@REGISTRY.register(API_KEY, 0, 4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.services.cluster
    topics = ctx.services.topics
    entry_cls = cls(ctx, "DescribeConfigsResourceResult")
    # v0 has no synonyms (nor the class for them); v1+ give them only when asked.
    synonym_cls = cls(ctx, "DescribeConfigsSynonym") if ctx.api_version >= 1 else None
    with_synonyms = synonym_cls is not None and getattr(request, "include_synonyms", False)
    layers: Layers = [
        (topics.defaults_at(topics.local_scope), DYNAMIC_BROKER_CONFIG),
        (topics.defaults_at(""), DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
    static = cluster.broker_configs()
    results = []
    for res in request.resources:
        code, message = ErrorCode.none, None
        values: dict[str, Shown] = {}
        refusal = config_refusal(
            ctx, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name
        )
        if refusal != ErrorCode.none:
            code = refusal
        elif res.resource_type == TOPIC:
            topic = await topics.lookup(res.resource_name)
            if topic is None:
                code = ErrorCode.unknown_topic_or_partition
                message = f"topic {res.resource_name!r} does not exist"
            else:
                values = _topic_values(topic.configs, layers, static)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(cluster.node_id)):
                code = ErrorCode.invalid_request
                message = f"broker {res.resource_name!r} is not this node ({cluster.node_id})"
            elif res.resource_name == "":
                # The cluster-wide default resource shows only the configs set on it,
                # each with only that synonym, as Kafka's does.
                values = {
                    k: Shown([c for c in v.chain if c[2] == DYNAMIC_DEFAULT_BROKER_CONFIG], v.defn)
                    for k, v in _broker_values({}, layers[1:]).items()
                    if v.source == DYNAMIC_DEFAULT_BROKER_CONFIG
                }
            else:
                values = _broker_values(static, layers)
        elif res.resource_type == GROUP:
            values = _group_values(topics.group_configs(res.resource_name), static)
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
                value=None if shown.sensitive else shown.value,
                read_only=shown.read_only,
                config_source=shown.source,
                is_default=shown.source == DEFAULT_CONFIG,
                is_sensitive=shown.sensitive,
                synonyms=tuple(
                    make(synonym_cls, name=n, value=None if shown.sensitive else v, source=src)
                    for n, v, src in shown.chain
                )
                if with_synonyms and synonym_cls is not None
                else (),
                config_type=CONFIG_TYPES.get(shown.defn.type, 0) if shown.defn else 0,
                documentation=None,
            )
            for name, shown in sorted(values.items())
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
