"""Heartbeat (key 12), v0-4: keeps a classic member alive; tells it when to rejoin."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import group_id_error
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 12


@REGISTRY.register(API_KEY, 0, 4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    error = group_id_error(request.group_id)
    if not authorize(ctx, AclOperation.READ, GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif error is ErrorCode.none:
        error = await ctx.services.groups.heartbeat(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            request.generation_id,
        )
    return make(cls(ctx, "HeartbeatResponse"), throttle_time=NO_THROTTLE, error_code=error)
