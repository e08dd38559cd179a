"""OffsetFetch (key 9), v0-9: a group's committed offsets (-1 where none).

v0-7 ask for one group, v8+ for several; a null topic list (v2+) means every
committed offset of the group. v9 names the asking member and its epoch
(KIP-848), checked against the group. v0 reads the same offsets as v1: Kafka
3.9 read v0 from ZooKeeper in ZooKeeper mode (and refused it in KRaft mode);
zonegate has one offset store, so what OffsetCommit v0 wrote, v0 reads back.

As Kafka's KafkaApis: a group the principal may not DESCRIBE answers
GROUP_AUTHORIZATION_FAILED; a topic asked for by name that it may not DESCRIBE
answers TOPIC_AUTHORIZATION_FAILED on its partitions, and a request for every
offset leaves such topics out.

With `require_stable` (v7+, KIP-447), a partition whose offset is pending in an open
transaction (TxnOffsetCommit, docs/transactions.md) answers UNSTABLE_OFFSET_COMMIT with
no offset, and the consumer asks again once the transaction ended, as with Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, TOPIC, authorize, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, CommittedOffset

API_KEY = 9
REFUSED = -2  # the commit time marking a partition answered TOPIC_AUTHORIZATION_FAILED
UNSTABLE = -3  # the commit time marking a partition answered UNSTABLE_OFFSET_COMMIT


async def _fetch(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    member_id: str | None,
    member_epoch: int,
    require_stable: bool,
) -> tuple[ErrorCode, list[CommittedOffset]]:
    error, offsets = await _fetch_allowed(ctx, group_id, topics, member_id, member_epoch)
    if not require_stable or error != ErrorCode.none or not offsets:
        return error, offsets
    pending = set(await ctx.services.groups.pending_offsets(group_id))
    return error, [
        CommittedOffset(o.topic, o.partition, -1, -1, "", UNSTABLE)
        if (o.topic, o.partition) in pending and o.commit_ms != REFUSED
        else o
        for o in offsets
    ]


async def _fetch_allowed(
    ctx: RequestContext, group_id: str, topics: Any, member_id: str | None, member_epoch: int
) -> tuple[ErrorCode, list[CommittedOffset]]:
    if not authorize(ctx, AclOperation.DESCRIBE, GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    if not group_id:
        return ErrorCode.invalid_group_id, []
    if topics is None:
        error, found = await ctx.services.groups.fetch_offsets(
            group_id, None, member_id, member_epoch
        )
        allowed = authorized_by_name(
            ctx, AclOperation.DESCRIBE, TOPIC, found, lambda o: o.topic, log_denied=False
        )
        return error, [o for o in found if o.topic in allowed]
    allowed = authorized_by_name(ctx, AclOperation.DESCRIBE, TOPIC, topics, lambda t: t.name)
    wanted = [(t.name, p) for t in topics if t.name in allowed for p in t.partition_indexes]
    error, found = (
        await ctx.services.groups.fetch_offsets(group_id, wanted, member_id, member_epoch)
        if wanted or not topics
        else (ErrorCode.none, [])
    )
    refused = [
        CommittedOffset(t.name, p, -1, -1, "", REFUSED)
        for t in topics
        if t.name not in allowed
        for p in t.partition_indexes
    ]
    return error, found + refused


_ERRORS = {
    REFUSED: ErrorCode.topic_authorization_failed,
    UNSTABLE: ErrorCode.unstable_offset_commit,
}


def _topics(
    ctx: RequestContext, offsets: list[CommittedOffset], topic_name: str, part_name: str
) -> tuple[Any, ...]:
    topic_cls, part_cls = cls(ctx, topic_name), cls(ctx, part_name)
    by_topic: dict[str, list[CommittedOffset]] = {}
    for o in offsets:
        by_topic.setdefault(o.topic, []).append(o)
    return tuple(
        make(
            topic_cls,
            name=name,
            partitions=tuple(
                make(
                    part_cls,
                    partition_index=o.partition,
                    committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
                    error_code=_ERRORS.get(o.commit_ms, ErrorCode.none),
                )
                for o in parts
            ),
        )
        for name, parts in by_topic.items()
    )


@REGISTRY.register(API_KEY, 0, 9)
async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = cls(ctx, "OffsetFetchResponse")
    if ctx.api_version < 8:
        error, offsets = await _fetch(
            ctx,
            request.group_id,
            request.topics,
            None,
            -1,
            getattr(request, "require_stable", False),
        )
        return make(
            answer,
            throttle_time=NO_THROTTLE,
            error_code=error,
            topics=_topics(
                ctx, offsets, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition"
            ),
        )
    group_cls = cls(ctx, "OffsetFetchResponseGroup")
    groups = []
    for g in request.groups:
        error, offsets = await _fetch(
            ctx,
            g.group_id,
            g.topics,
            getattr(g, "member_id", None),
            getattr(g, "member_epoch", -1),
            request.require_stable,
        )
        groups.append(
            make(
                group_cls,
                group_id=g.group_id,
                error_code=error,
                topics=_topics(
                    ctx, offsets, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions"
                ),
            )
        )
    return make(answer, throttle_time=NO_THROTTLE, groups=tuple(groups))
