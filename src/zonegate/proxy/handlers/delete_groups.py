"""DeleteGroups (key 42), v0-2: deletes groups without members, with their offsets."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.forward import on_owner
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

API_KEY = 42


@REGISTRY.register(API_KEY, 0, 2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    item = cls(ctx, "DeletableGroupResult")
    results = []
    for gid in request.groups_names:
        if gid and not ctx.forwarded:
            one = dataclasses.replace(request, groups_names=(gid,))
            if forwarded := await on_owner(ctx, gid, one):
                results.append(forwarded.results[0])
                continue
        error = await ctx.node.coordinator.delete_group(gid) if gid else ErrorCode.invalid_group_id
        results.append(make(item, group_id=gid, error_code=error))
    return make(cls(ctx, "DeleteGroupsResponse"), throttle_time=NO_THROTTLE, results=tuple(results))
