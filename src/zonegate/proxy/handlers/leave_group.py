"""LeaveGroup (key 13), v0-5: members leave at once (v3+: several, by member or instance id)."""

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

API_KEY = 13


@REGISTRY.register(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    error = group_id_error(request.group_id)
    if not authorize(ctx, AclOperation.READ, GROUP, request.group_id):
        # Kafka's getErrorResponse: the error alone, no members.
        error, members = ErrorCode.group_authorization_failed, []
    elif error is ErrorCode.none and not members:
        error = ErrorCode.invalid_request
    errors = [error] * len(members)
    if error is ErrorCode.none:
        error, errors = await ctx.services.groups.leave(request.group_id, members)
    if ctx.api_version < 3 and error is ErrorCode.none:
        error = errors[0]
    item = cls(ctx, "MemberResponse") if ctx.api_version >= 3 else None
    return make(
        cls(ctx, "LeaveGroupResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        members=tuple(
            make(item, member_id=mid, group_instance_id=iid, error_code=e)
            for (mid, iid), e in zip(members, errors, strict=True)
        )
        if item is not None
        else (),
    )
