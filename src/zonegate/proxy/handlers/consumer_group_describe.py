"""ConsumerGroupDescribe (key 69), v0-1: a KIP-848 group's epochs, assignor and members,
with each member's current and target assignment.

A classic or unknown group answers GROUP_ID_NOT_FOUND, as Kafka does; admin
clients (librdkafka's DescribeConsumerGroups) then ask DescribeGroups instead.
Each group is answered by its coordinator (services/groups.py). A group the
principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED; authorized operations
(KIP-430) are filled in when asked, as Kafka's KafkaApis does.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, authorize, operations
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, ConsumerGroupDescription

API_KEY = 69
_UNKNOWN_OPERATIONS = -2147483648
_CONSUMER_MEMBER = 1  # member_type (v1): a member speaking the consumer protocol


def _assignment(
    ctx: RequestContext, parts: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
) -> Any:
    tp_cls = cls(ctx, "TopicPartitions")
    return make(
        cls(ctx, "Assignment"),
        topic_partitions=tuple(
            make(tp_cls, topic_id=tid, topic_name=name, partitions=ps) for tid, name, ps in parts
        ),
    )


def _group(ctx: RequestContext, d: ConsumerGroupDescription, with_operations: bool) -> Any:
    group_cls = cls(ctx, "DescribedGroup")
    member_cls = cls(ctx, "Member")
    return make(
        group_cls,
        error_code=d.error,
        error_message=d.message,
        group_id=d.group_id,
        group_state=d.state,
        group_epoch=d.group_epoch,
        assignment_epoch=d.assignment_epoch,
        assignor_name=d.assignor_name,
        members=tuple(
            make(
                member_cls,
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(ctx, m.assignment),
                target_assignment=_assignment(ctx, m.target_assignment),
                member_type=_CONSUMER_MEMBER,
            )
            for m in d.members
        ),
        authorized_operations=(
            operations(ctx, GROUP, d.group_id)
            if with_operations and d.error == ErrorCode.none
            else _UNKNOWN_OPERATIONS
        ),
    )


def _refused(ctx: RequestContext, group_id: str) -> Any:
    return make(
        cls(ctx, "DescribedGroup"),
        error_code=ErrorCode.group_authorization_failed,
        error_message=None,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=(),
        authorized_operations=_UNKNOWN_OPERATIONS,
    )


@REGISTRY.register(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    with_operations = bool(request.include_authorized_operations)
    groups = [
        _group(ctx, await ctx.services.groups.describe_consumer(gid), with_operations)
        if authorize(ctx, AclOperation.DESCRIBE, GROUP, gid)
        else _refused(ctx, gid)
        for gid in request.group_ids
    ]
    return make(
        cls(ctx, "ConsumerGroupDescribeResponse"), throttle_time=NO_THROTTLE, groups=tuple(groups)
    )
