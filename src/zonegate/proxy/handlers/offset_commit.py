"""OffsetCommit (key 8), v0-9: a group's committed offsets, durable before the answer.

Members commit in their generation (classic) or member epoch (KIP-848); a
commit with generation -1 and no member id is a "simple" commit, allowed to a
group without members (kcat, standalone consumers, admin tools). Unknown
topics or partitions and metadata over 4096 bytes fail per partition.

v0 carries no generation or member, so it is always a simple commit, the
rule Kafka 3.9's coordinator names v0 for (its ZooKeeper mode kept v0 offsets
in ZooKeeper, apart from the others, and its KRaft mode refuses v0; zonegate
has one offset store, which v0 reads and writes like the other versions). v1's
per-partition commit timestamp, when not -1, is stored as the commit time, as
Kafka 3.9 does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, TOPIC, authorize, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import group_id_error, topic_partition_errors
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, OffsetToCommit

API_KEY = 8


@REGISTRY.register(API_KEY, 0, 9)
async def handle(ctx: RequestContext, request: Any) -> Any:
    offsets = [
        OffsetToCommit(
            t.name,
            p.partition_index,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
            getattr(p, "commit_timestamp", -1),
        )
        for t in request.topics
        for p in t.partitions
    ]
    error = group_id_error(request.group_id)
    errors: list[ErrorCode]
    if not authorize(ctx, AclOperation.READ, GROUP, request.group_id):
        errors = [ErrorCode.group_authorization_failed] * len(offsets)
    elif error is not ErrorCode.none:
        errors = [error] * len(offsets)
    else:
        # As Kafka: READ on each topic; a refused one fails its partitions alone.
        allowed = authorized_by_name(
            ctx, AclOperation.READ, TOPIC, request.topics, lambda t: t.name
        )
        committed = iter(
            await ctx.services.groups.commit_offsets(
                request.group_id,
                getattr(request, "generation_id_or_member_epoch", -1),
                getattr(request, "member_id", ""),
                getattr(request, "group_instance_id", None),
                [o for o in offsets if o.topic in allowed],
            )
            if allowed
            else []
        )
        errors = [
            next(committed) if o.topic in allowed else ErrorCode.topic_authorization_failed
            for o in offsets
        ]
    return make(
        cls(ctx, "OffsetCommitResponse"),
        throttle_time=NO_THROTTLE,
        topics=topic_partition_errors(ctx, request.topics, errors, "OffsetCommitResponse"),
    )
