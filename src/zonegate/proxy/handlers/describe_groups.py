"""DescribeGroups (key 15), v0-6: a classic group's state, protocol and members.

An unknown group is described as Kafka does: state "Dead" (v6+: also
GROUP_ID_NOT_FOUND). A KIP-848 group is described by ConsumerGroupDescribe;
here it answers GROUP_ID_NOT_FOUND naming why, as Kafka 4 does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import ClassicGroup
from zonegate.proxy.context import RequestContext
from zonegate.proxy.forward import on_owner
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

API_KEY = 15
_UNKNOWN_OPERATIONS = -2147483648


async def _describe(ctx: RequestContext, request: Any, group_id: str) -> Any:
    if group_id and not ctx.forwarded:
        one = dataclasses.replace(request, groups=(group_id,))
        if forwarded := await on_owner(ctx, group_id, one):
            return forwarded.groups[0]
    group_cls = cls(ctx, "DescribedGroup")
    member_cls = cls(ctx, "DescribedGroupMember")
    group = await ctx.node.coordinator.get(group_id) if group_id else None
    base = {
        "group_id": group_id,
        "authorized_operations": _UNKNOWN_OPERATIONS,
        "protocol_type": "",
        "protocol_data": "",
        "members": (),
    }
    if group is None or not isinstance(group, ClassicGroup):
        missing = ctx.api_version >= 6 or group is not None
        return make(
            group_cls,
            error_code=ErrorCode.group_id_not_found if missing else ErrorCode.none,
            error_message=(
                None
                if group is None
                else f"group {group_id} is a {group.group_type} group, not a classic one"
            ),
            group_state="Dead",
            **base,
        )
    stable = group.state_name == "Stable"
    return make(
        group_cls,
        **{
            **base,
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_state": group.state_name,
            "protocol_type": group.protocol_type or "",
            "protocol_data": group.protocol_name or "" if stable else "",
            "members": tuple(
                make(
                    member_cls,
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata_for(group.protocol_name or "") if stable else b"",
                    member_assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            ),
        },
    )


@REGISTRY.register(API_KEY, 0, 6)
async def handle(ctx: RequestContext, request: Any) -> Any:
    return make(
        cls(ctx, "DescribeGroupsResponse"),
        throttle_time=NO_THROTTLE,
        groups=tuple([await _describe(ctx, request, gid) for gid in request.groups]),
    )
