"""JoinGroup (key 11), v0-9: a member joins (or rejoins) a classic group's rebalance.

The answer may wait until the rebalance completes (every member has rejoined,
or the rebalance timeout expires). v4+ members get their id first
(MEMBER_ID_REQUIRED, KIP-394); v5+ may be static (`group.instance.id`).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import group_id_error, ms
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, JoinRequest, JoinResult

API_KEY = 11


@REGISTRY.register(API_KEY, 0, 9)
async def handle(ctx: RequestContext, request: Any) -> Any:
    error = group_id_error(request.group_id)
    if not authorize(ctx, AclOperation.READ, GROUP, request.group_id):
        result = JoinResult(ErrorCode.group_authorization_failed, request.member_id)
    elif error is not ErrorCode.none:
        result = JoinResult(error, request.member_id)
    else:
        session_ms = ms(request.session_timeout)
        join = JoinRequest(
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            client_id=ctx.client_id or "",
            client_host=f"/{ctx.client.host}",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=ms(getattr(request, "rebalance_timeout", session_ms)),
            protocol_type=request.protocol_type,
            protocols=[(p.name, p.metadata) for p in request.protocols],
            require_known_member_id=ctx.api_version >= 4,
        )
        result = await ctx.services.groups.join(request.group_id, join)
    member = cls(ctx, "JoinGroupResponseMember")
    legacy = ctx.api_version < 7  # protocol name not nullable before v7
    return make(
        cls(ctx, "JoinGroupResponse"),
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=(result.protocol_name or "") if legacy else result.protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            make(member, member_id=mid, group_instance_id=iid, metadata=md)
            for mid, iid, md in result.members
        ),
    )
