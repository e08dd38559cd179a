"""AlterConfigs (key 33, v0-2) and IncrementalAlterConfigs (key 44, v0-1).

Topics: AlterConfigs replaces a topic's configs with those it names (as Kafka's
does: the others go back to their defaults); IncrementalAlterConfigs sets,
deletes, appends to or subtracts from single configs (APPEND and SUBTRACT on
list configs only: `cleanup.policy`, the throttled replicas). The broker
resource "" (kafka-configs.sh `--entity-type brokers --entity-default`) holds
the cluster-wide defaults of the broker configs Kafka changes at run time
(services/broker_configs.py), topic configs' defaults among them under their
broker names (`log.retention.ms`...); a broker resource named by a node id
holds that node's own, over the cluster's, as Kafka's per-broker dynamic
configs do: they apply where that node applies topic configs (produce it
receives, retention of partitions it leads). The Python clients can only name a
broker by id. A refused broker config gets Kafka's INVALID_REQUEST with its
message. A group resource (type 32, KIP-848) holds a group's own configs
(services/group_configs.py). Unknown topic or group configs and bad values get
INVALID_CONFIG naming them; `validate_only` checks and changes nothing. The
answering node shows a change before it answers (services/catalog.py keeps a
refresh that read the store before the change from putting the old value back);
every other node at its next catalog refresh.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import config_refusal
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, InvalidConfig, apply_incremental
from zonegate.services.broker_configs import (
    InvalidBrokerConfig,
    broker_config_def,
    shown_name,
)
from zonegate.services.group_configs import GROUP_CONFIGS, node_bounds, unknown_group_config

TOPIC, BROKER, GROUP = 2, 4, 32


async def _alter(
    ctx: RequestContext,
    res: Any,
    ops: list[tuple[str, int, str | None]],
    *,
    replace: bool,
    validate_only: bool,
) -> tuple[ErrorCode, str | None]:
    topics = ctx.services.topics
    try:
        if res.resource_type == TOPIC:
            topic = await topics.lookup(res.resource_name)
            if topic is None:
                return ErrorCode.unknown_topic_or_partition, (
                    f"topic {res.resource_name!r} does not exist"
                )
            changes = apply_incremental({} if replace else topic.configs, ops, topics.defaults)
            await topics.alter_configs(
                res.resource_name, changes, replace=replace, validate_only=validate_only
            )
        elif res.resource_type == BROKER:
            scope = res.resource_name
            if scope != "" and not (scope.isdigit() and scope.isascii()):
                return ErrorCode.invalid_request, (
                    f'broker resource {scope!r}: name a node id, or "" for the '
                    "cluster-wide defaults"
                )
            current = {} if replace else topics.defaults_at(scope)
            by_broker_name = {shown_name(k): v for k, v in current.items()}
            changes = apply_incremental(
                by_broker_name, ops, lookup=broker_config_def, unknown_allowed=True
            )
            await topics.alter_defaults(
                scope, changes, replace=replace, validate_only=validate_only
            )
        elif res.resource_type == GROUP:
            group_id = res.resource_name
            current = {} if replace else topics.group_configs(group_id)
            changes = apply_incremental(
                current, ops, lookup=GROUP_CONFIGS.get, unknown_allowed=True
            )
            for name in changes:
                if name not in GROUP_CONFIGS:
                    raise unknown_group_config(name)
            await topics.alter_group_configs(
                group_id,
                changes,
                replace=replace,
                validate_only=validate_only,
                bounds=node_bounds(ctx.services.cluster.broker_configs()),
            )
        else:
            return ErrorCode.invalid_request, (
                f"resource type {res.resource_type} is not supported (topics, brokers and "
                "groups are)"
            )
    except InvalidBrokerConfig as exc:
        return ErrorCode.invalid_request, str(exc)
    except InvalidConfig as exc:
        return ErrorCode.invalid_config, str(exc)
    except LookupError as exc:
        return ErrorCode.unknown_topic_or_partition, str(exc)
    return ErrorCode.none, None


async def _answer(ctx: RequestContext, request: Any, incremental: bool, answer: str) -> Any:
    item = cls(ctx, "AlterConfigsResourceResponse")
    out = []
    seen: set[tuple[int, str]] = set()
    for res in request.resources:
        key = (res.resource_type, res.resource_name)
        message: str | None
        if key in seen:
            code, message = ErrorCode.invalid_request, "resource named twice in one request"
        else:
            seen.add(key)
            refusal = config_refusal(
                ctx, AclOperation.ALTER_CONFIGS, res.resource_type, res.resource_name
            )
            ops = [(c.name, c.config_operation if incremental else 0, c.value) for c in res.configs]
            code, message = (
                await _alter(
                    ctx, res, ops, replace=not incremental, validate_only=request.validate_only
                )
                if refusal == ErrorCode.none
                else (refusal, None)
            )
        out.append(
            make(
                item,
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return make(cls(ctx, answer), throttle_time=NO_THROTTLE, responses=tuple(out))


@REGISTRY.register(33, 0, 2)
async def handle_alter(ctx: RequestContext, request: Any) -> Any:
    return await _answer(ctx, request, False, "AlterConfigsResponse")


@REGISTRY.register(44, 0, 1)
async def handle_incremental(ctx: RequestContext, request: Any) -> Any:
    return await _answer(ctx, request, True, "IncrementalAlterConfigsResponse")
