"""FindCoordinator (key 10), v0-6: which node coordinates a consumer group (key type 0)
or a transactional id (key type 1).

v0-3 ask for one key, v4+ for several. A group's answer comes from
`coordinator_for(group id, client zone)`, a transactional id's from
`txn_coordinator_for(its shard, client zone)` (services/cluster.py): with zones, a node
of the client's own zone, which forwards the calls to the real coordinator (the owner of
the group, or of the id's transaction shard), so coordinator traffic from clients never
crosses zones either. Share groups (key type 2) are not served: INVALID_REQUEST, as
Kafka without a share coordinator. With an authorizer, as Kafka's KafkaApis: a group needs
DESCRIBE on it (GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE on it
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
_GROUP, _TRANSACTION = 0, 1


def _lookup(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    none = {"node_id": -1, "host": "", "port": -1}
    if key_type not in (_GROUP, _TRANSACTION):
        return {**none, "error_code": ErrorCode.invalid_request, "error_message": None}
    resource = GROUP if key_type == _GROUP else TRANSACTIONAL_ID
    if not authorize(ctx, AclOperation.DESCRIBE, resource, key):
        error = (
            ErrorCode.group_authorization_failed
            if key_type == _GROUP
            else ErrorCode.transactional_id_authorization_failed
        )
        return {**none, "error_code": error, "error_message": None}
    cluster = ctx.services.cluster
    if key_type == _TRANSACTION:
        shard = ctx.services.transactions.shard_of(key)
        node = cluster.txn_coordinator_for(shard, ctx.client_zone, ctx.listener)
    elif not key:
        return {**none, "error_code": ErrorCode.invalid_request, "error_message": "empty group id"}
    else:
        node = cluster.coordinator_for(key, ctx.client_zone, ctx.listener)
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
