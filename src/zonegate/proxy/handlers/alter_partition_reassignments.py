"""AlterPartitionReassignments (key 45), v0-1: move partitions to the nodes named.

A partition's replica list here is its preferred node and its leader
(services/reassignment.py): the list's first node becomes the preferred
leader and its first live node the leader, in one metadata transaction, so the
reassignment is done when answered. A null list cancels: none is ever in
progress, so NO_REASSIGNMENT_IN_PROGRESS, as Kafka answers with nothing to
cancel. v1 adds allow_replication_factor_change (KIP-860): false refuses a list
of other than one node with INVALID_REPLICATION_FACTOR.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, TopicPartition

API_KEY = 45


@REGISTRY.register(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted: dict[TopicPartition, tuple[int, ...] | None] = {}
    for t in request.topics:
        for p in t.partitions:
            wanted[(t.name, p.partition_index)] = (
                None if p.replicas is None else tuple(int(n) for n in p.replicas)
            )
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return make(
            cls(ctx, "AlterPartitionReassignmentsResponse"),
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=None,
            responses=(),
        )
    outcomes = await ctx.services.leadership.reassign(
        wanted,
        allow_replication_factor_change=getattr(request, "allow_replication_factor_change", True),
    )
    part_cls = cls(ctx, "ReassignablePartitionResponse")
    topic_cls = cls(ctx, "ReassignableTopicResponse")
    responses = tuple(
        make(
            topic_cls,
            name=t.name,
            partitions=tuple(
                make(
                    part_cls,
                    partition_index=p.partition_index,
                    error_code=outcome.error,
                    error_message=outcome.message,
                )
                for p in t.partitions
                for outcome in (outcomes[(t.name, p.partition_index)],)
            ),
        )
        for t in request.topics
    )
    return make(
        cls(ctx, "AlterPartitionReassignmentsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        responses=responses,
    )
