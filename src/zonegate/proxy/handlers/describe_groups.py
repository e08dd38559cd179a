"""DescribeGroups (key 15), v0-6: a classic group's state, protocol and members.

An unknown group is described as Kafka does: state "Dead" (v6+: also
GROUP_ID_NOT_FOUND). A KIP-848 group is described by ConsumerGroupDescribe;
here it answers GROUP_ID_NOT_FOUND naming why, as Kafka 4 does. A group the
principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED; authorized
operations (KIP-430, v3+) are filled in when asked, as Kafka's KafkaApis does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, authorize, operations
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 15
_UNKNOWN_OPERATIONS = -2147483648


async def _describe(ctx: RequestContext, group_id: str, with_operations: bool) -> Any:
    group_cls = cls(ctx, "DescribedGroup")
    member_cls = cls(ctx, "DescribedGroupMember")
    base = {
        "group_id": group_id,
        "authorized_operations": _UNKNOWN_OPERATIONS,
        "protocol_type": "",
        "protocol_data": "",
        "members": (),
    }
    if not authorize(ctx, AclOperation.DESCRIBE, GROUP, group_id):
        return make(
            group_cls,
            error_code=ErrorCode.group_authorization_failed,
            error_message=None,
            group_state="",
            **base,
        )
    d = await ctx.services.groups.describe_classic(group_id)
    if d.error == ErrorCode.group_id_not_found:
        missing = ctx.api_version >= 6 or bool(d.group_type)
        return make(
            group_cls,
            error_code=ErrorCode.group_id_not_found if missing else ErrorCode.none,
            error_message=(
                f"group {group_id} is a {d.group_type} group, not a classic one"
                if d.group_type
                else None
            ),
            group_state="Dead",
            **base,
        )
    if d.error != ErrorCode.none:
        return make(group_cls, error_code=d.error, error_message=None, group_state="", **base)
    return make(
        group_cls,
        **{
            **base,
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_state": d.state,
            "authorized_operations": (
                operations(ctx, GROUP, group_id) if with_operations else _UNKNOWN_OPERATIONS
            ),
            "protocol_type": d.protocol_type,
            "protocol_data": d.protocol,
            "members": tuple(
                make(
                    member_cls,
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in d.members
            ),
        },
    )


@REGISTRY.register(API_KEY, 0, 6)
async def handle(ctx: RequestContext, request: Any) -> Any:
    with_operations = ctx.api_version >= 3 and request.include_authorized_operations
    return make(
        cls(ctx, "DescribeGroupsResponse"),
        throttle_time=NO_THROTTLE,
        groups=tuple([await _describe(ctx, gid, with_operations) for gid in request.groups]),
    )
