"""FindCoordinator (key 10), v0-6: which node coordinates a consumer group.

v0-3 ask for one key, v4+ for several. The answer comes from
`coordinator_for(group id, client zone)` (services/cluster.py): with zones, a node of the
client's own zone (which forwards group calls to the group's real coordinator),
so group traffic from clients never crosses zones either. Transaction
coordinators are not served (no transactions): COORDINATOR_NOT_AVAILABLE. With an
authorizer, as Kafka's KafkaApis: a group needs DESCRIBE on it
(GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, TRANSACTIONAL_ID, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 10
_GROUP = 0


def _lookup(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    none = {"node_id": -1, "host": "", "port": -1}
    resource = GROUP if key_type == _GROUP else TRANSACTIONAL_ID
    if not authorize(ctx, AclOperation.DESCRIBE, resource, key):
        error = (
            ErrorCode.group_authorization_failed
            if key_type == _GROUP
            else ErrorCode.transactional_id_authorization_failed
        )
        return {**none, "error_code": error, "error_message": None}
    if key_type != _GROUP:
        return {
            **none,
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": (
                "zonegate has no transaction coordinator (transactions are not served)"
            ),
        }
    if not key:
        return {**none, "error_code": ErrorCode.invalid_request, "error_message": "empty group id"}
    node = ctx.services.cluster.coordinator_for(key, ctx.client_zone, ctx.listener)
    endpoint = node.endpoint(ctx.listener) if node is not None else None
    if node is None or endpoint is None:
        return {
            **none,
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": "no live node" if node is None else f"no {ctx.listener} listener",
        }
    return {
        "node_id": node.node_id,
        "host": endpoint[0],
        "port": endpoint[1],
        "error_code": ErrorCode.none,
        "error_message": None,
    }


@REGISTRY.register(API_KEY, 0, 6)
async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = cls(ctx, "FindCoordinatorResponse")
    key_type = getattr(request, "key_type", _GROUP)
    if ctx.api_version >= 4:
        item = cls(ctx, "Coordinator")
        return make(
            answer,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                make(item, key=k, **_lookup(ctx, k, key_type)) for k in request.coordinator_keys
            ),
        )
    return make(answer, throttle_time=NO_THROTTLE, **_lookup(ctx, request.key, key_type))
