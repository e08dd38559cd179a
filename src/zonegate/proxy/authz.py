"""The handlers' one way to ask the authorizer: a check for this request's principal and
client address, named by the API in the denial's log line, as Kafka's AuthHelper does.

The decision is the authorizer service's (services/authorizer.py); this module only
fills in who asks, from where, and for which request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import TypeVar

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.schema import response_module
from zonegate.services.api import AclOperation, ResourceType

T = TypeVar("T")

CLUSTER_NAME = "kafka-cluster"
# The resource types the handlers check, by their short names.
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID


@cache
def request_name(api_key: int, version: int) -> str:
    """Kafka's ApiKeys name ("Produce", "OffsetForLeaderEpoch"), from kio's classes."""
    module = response_module(api_key, version)
    names = [n for n in dir(module) if n.endswith("Response")]
    return min(names, key=len).removesuffix("Response") if names else str(api_key)


def authorize(
    ctx: RequestContext,
    op: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    log_denied: bool = True,
) -> bool:
    return ctx.services.authorizer.authorize(
        ctx.principal,
        ctx.client.host,
        op,
        resource_type,
        name,
        request=request_name(ctx.api_key, ctx.api_version),
        log_denied=log_denied,
    )


def authorize_cluster(ctx: RequestContext, op: AclOperation, *, log_denied: bool = True) -> bool:
    return authorize(ctx, op, CLUSTER, CLUSTER_NAME, log_denied=log_denied)


def authorized_by_name(
    ctx: RequestContext,
    op: AclOperation,
    resource_type: ResourceType,
    items: Iterable[T],
    name: Callable[[T], str],
    *,
    log_denied: bool = True,
) -> set[str]:
    """Kafka's AuthHelper.filterByAuthorized: the names among `items` that are allowed,
    each name checked once however often it appears."""
    names = {name(item) for item in items}
    return {n for n in names if authorize(ctx, op, resource_type, n, log_denied=log_denied)}


def operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """KIP-430's authorized operations of the resource for this request's principal."""
    return ctx.services.authorizer.authorized_operations(
        ctx.principal, ctx.client.host, resource_type, name
    )


# Kafka's ConfigResource.Type codes, and the ACL resource each one is checked on.
_CONFIG_TOPIC, _CONFIG_GROUP = 2, 32
_CONFIG_ERRORS = {
    TOPIC: ErrorCode.topic_authorization_failed,
    GROUP: ErrorCode.group_authorization_failed,
    CLUSTER: ErrorCode.cluster_authorization_failed,
}


def config_refusal(ctx: RequestContext, op: AclOperation, config_type: int, name: str) -> ErrorCode:
    """Kafka's DescribeConfigs/AlterConfigs check of one config resource: a topic's on the
    topic, a group's on the group, anything else (brokers, loggers) on the cluster.
    ErrorCode.none when allowed."""
    if config_type == _CONFIG_TOPIC:
        resource, resource_name = TOPIC, name
    elif config_type == _CONFIG_GROUP:
        resource, resource_name = GROUP, name
    else:
        resource, resource_name = CLUSTER, CLUSTER_NAME
    if authorize(ctx, op, resource, resource_name):
        return ErrorCode.none
    return _CONFIG_ERRORS[resource]
