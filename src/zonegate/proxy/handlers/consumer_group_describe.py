"""ConsumerGroupDescribe (key 69), v0-1: a KIP-848 group's epochs, assignor and members,
with each member's current and target assignment.

A classic or unknown group answers GROUP_ID_NOT_FOUND, as Kafka does; admin
clients (librdkafka's DescribeConsumerGroups) then ask DescribeGroups instead.
Each group is answered by its coordinator (forwarded when that is another node).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from zonegate.coordinator.consumer_group import ConsumerGroup, Parts
from zonegate.coordinator.consumer_service import Described, consumer_describe
from zonegate.proxy.context import RequestContext
from zonegate.proxy.forward import on_owner
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

API_KEY = 69
_UNKNOWN_OPERATIONS = -2147483648
_CONSUMER_MEMBER = 1  # member_type (v1): a member speaking the consumer protocol


def _assignment(ctx: RequestContext, group: ConsumerGroup, parts: Parts) -> Any:
    tp_cls = cls(ctx, "TopicPartitions")

    def name(tid: uuid.UUID) -> str:
        known = group.topic_name(tid)
        if known is None:
            info = ctx.node.catalog.by_id(tid)
            known = info.name if info is not None else ""
        return known

    return make(
        cls(ctx, "Assignment"),
        topic_partitions=tuple(
            make(tp_cls, topic_id=tid, topic_name=name(tid), partitions=tuple(sorted(ps)))
            for tid, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))
        ),
    )


def _group(ctx: RequestContext, d: Described) -> Any:
    group_cls = cls(ctx, "DescribedGroup")
    g = d.group
    if g is None:
        return make(
            group_cls,
            error_code=d.error,
            error_message=d.message,
            group_id=d.group_id,
            group_state="Dead",
            group_epoch=-1,
            assignment_epoch=-1,
            assignor_name="",
            members=(),
            authorized_operations=_UNKNOWN_OPERATIONS,
        )
    member_cls = cls(ctx, "Member")
    return make(
        group_cls,
        error_code=d.error,
        error_message=None,
        group_id=g.group_id,
        group_state=g.state_name,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor_name=g.preferred_assignor(),
        members=tuple(
            make(
                member_cls,
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(ctx, g, m.assigned),
                target_assignment=_assignment(ctx, g, g.target.get(m.member_id, {})),
                member_type=_CONSUMER_MEMBER,
            )
            for m in g.members.values()
        ),
        authorized_operations=_UNKNOWN_OPERATIONS,
    )


@REGISTRY.register(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    groups: list[Any] = []
    for gid in request.group_ids:
        if gid and not ctx.forwarded:
            one = dataclasses.replace(request, group_ids=(gid,))
            if forwarded := await on_owner(ctx, gid, one):
                groups.append(forwarded.groups[0])
                continue
        (described,) = await consumer_describe(ctx.node.coordinator, [gid])
        groups.append(_group(ctx, described))
    return make(
        cls(ctx, "ConsumerGroupDescribeResponse"), throttle_time=NO_THROTTLE, groups=tuple(groups)
    )
