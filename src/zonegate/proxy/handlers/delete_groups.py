"""DeleteGroups (key 42), v0-2: deletes groups without members, with their offsets."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 42


@REGISTRY.register(API_KEY, 0, 2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    item = cls(ctx, "DeletableGroupResult")
    results = []
    for gid in request.groups_names:
        if not authorize(ctx, AclOperation.DELETE, GROUP, gid):
            error = ErrorCode.group_authorization_failed
        elif gid:
            error = await ctx.services.groups.delete_group(gid)
        else:
            error = ErrorCode.invalid_group_id
        results.append(make(item, group_id=gid, error_code=error))
    return make(cls(ctx, "DeleteGroupsResponse"), throttle_time=NO_THROTTLE, results=tuple(results))
