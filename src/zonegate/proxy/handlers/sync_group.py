"""SyncGroup (key 14), v0-5: the leader hands out assignments; every member gets its own."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import group_id_error
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, SyncResult

API_KEY = 14


@REGISTRY.register(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    error = group_id_error(request.group_id)
    if not authorize(ctx, AclOperation.READ, GROUP, request.group_id):
        result = SyncResult(ErrorCode.group_authorization_failed)
    elif error is not ErrorCode.none:
        result = SyncResult(error)
    else:
        result = await ctx.services.groups.sync(
            request.group_id,
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            generation=request.generation_id,
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            assignments={a.member_id: a.assignment for a in request.assignments},
        )
    return make(
        cls(ctx, "SyncGroupResponse"),
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
