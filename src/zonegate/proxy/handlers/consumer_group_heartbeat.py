"""ConsumerGroupHeartbeat (key 68), v0-1: the KIP-848 consumer group protocol.

One call does joining (member epoch 0), heartbeating, reconciling (the member
reports the partitions it owns; the answer carries its assignment when it
changed or the request was a full one) and leaving (-1; -2 for a static
member leaving for a while). The server assigns with `uniform` (default) or
`range` (`group.remote.assignor`). v1 members name themselves; v0 members
with no id get one from the coordinator. The heartbeat interval and session
timeout are the node's `--group-consumer-heartbeat-interval-ms` and
`--group-consumer-session-timeout-ms`. State machine: coordinator/consumer_group.py.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, TOPIC, authorize, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import ms
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, HeartbeatRequest

API_KEY = 68


@REGISTRY.register(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    # As Kafka's KafkaApis: READ on the group, DESCRIBE on every topic subscribed by name.
    if not authorize(ctx, AclOperation.READ, GROUP, request.group_id):
        return _refused(ctx, ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names or ()
    if names and len(
        authorized_by_name(ctx, AclOperation.DESCRIBE, TOPIC, names, lambda n: n)
    ) < len(set(names)):
        return _refused(ctx, ErrorCode.topic_authorization_failed)
    owned = request.topic_partitions
    req = HeartbeatRequest(
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=ms(request.rebalance_timeout),
        subscribed_topic_names=(
            None
            if request.subscribed_topic_names is None
            else tuple(request.subscribed_topic_names)
        ),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=(
            None
            if owned is None
            else tuple((tp.topic_id, tuple(tp.partitions)) for tp in owned if tp.topic_id)
        ),
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client.host}",
        api_version=ctx.api_version,
    )
    result = await ctx.services.groups.consumer_heartbeat(request.group_id, req)
    assignment = None
    if result.assignment is not None:
        tp_cls = cls(ctx, "TopicPartitions")
        assignment = make(
            cls(ctx, "Assignment"),
            topic_partitions=tuple(
                make(tp_cls, topic_id=tid, partitions=tuple(sorted(parts)))
                for tid, parts in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
            ),
        )
    return make(
        cls(ctx, "ConsumerGroupHeartbeatResponse"),
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )


def _refused(ctx: RequestContext, error: ErrorCode) -> Any:
    return make(
        cls(ctx, "ConsumerGroupHeartbeatResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=None,
        member_id=None,
        member_epoch=0,
        heartbeat_interval=datetime.timedelta(0),
        assignment=None,
    )
