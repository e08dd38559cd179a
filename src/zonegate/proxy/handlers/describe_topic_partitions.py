"""DescribeTopicPartitions (key 75), v0 (KIP-966): topics and their partitions, paged, as
Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache answer it. Kafka's
Java admin client describes topics by name with it (kafka-topics --describe).

- The topics named, or every topic when none is named; only those not before the
  cursor's topic (by name), in name order. A named list must hold the cursor's topic,
  and the cursor's partition must not be negative: otherwise the whole request is
  answered INVALID_REQUEST, each named topic with it (Kafka's getErrorResponse).
- DESCRIBE on each topic is checked before its existence is: a named topic refused is
  answered TOPIC_AUTHORIZATION_FAILED with the zero topic id (after the others), one
  refused while listing all is left out.
- Partitions from the cursor's partition (0 for the other topics), at most
  min(`response_partition_limit`, MAX_PARTITIONS_PER_RESPONSE), at least 1, in all. The
  topic whose partitions run past the limit ends the answer, with next_cursor at its
  first partition left out; a topic reached when the limit is used up exactly gets a
  next_cursor at its partition 0 and is not answered.
- A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, or
  INVALID_TOPIC_EXCEPTION for an invalid name (never created: this API does not).
- Partitions as Metadata tells this client (metadata.partition_fields: zone-rewritten
  leaders); no eligible leader replicas (the lists empty, as Kafka's for a partition
  without ELR). KIP-430's topic_authorized_operations always, of every topic answered
  but the refused ones, as Kafka fills them in.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorize, operations
from zonegate.proxy.context import RequestContext
from zonegate.proxy.error_answers import error_answer
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.metadata import partition_fields
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, InvalidTopic, check_topic_name

API_KEY = 75
# Kafka's max.request.partition.size.limit, at its default: the most partitions one
# answer holds whatever the request's limit.
MAX_PARTITIONS_PER_RESPONSE = 2000
ZERO_UUID = uuid.UUID(int=0)
NOT_ASKED = -2147483648  # the schema's default authorized operations


@REGISTRY.register(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = ctx.services.topics
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every = not request.topics
    if every:
        names = {t.name for t in topics.topics() if t.name >= cursor_topic}
    else:
        names = {t.name for t in request.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return error_answer(API_KEY, ctx.api_version, request, ErrorCode.invalid_request)
    if cursor is not None and cursor.partition_index < 0:
        return error_answer(API_KEY, ctx.api_version, request, ErrorCode.invalid_request)

    topic_cls = cls(ctx, "DescribeTopicPartitionsResponseTopic")
    part_cls = cls(ctx, "DescribeTopicPartitionsResponsePartition")
    # As Metadata: a lost zone's client is not told of its zone's dead nodes.
    await ctx.services.cluster.check_zone(ctx.client_zone)
    real = not ctx.services.cluster.rewrites(ctx.client_zone, ctx.listener)
    leader_of = ctx.services.cluster.leaders_for(ctx.client_zone, ctx.listener)

    def topic_error(name: str, code: ErrorCode, operations: int = NOT_ASKED) -> Any:
        return make(
            topic_cls,
            error_code=code,
            name=name,
            topic_id=ZERO_UUID,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=operations,
        )

    refused: list[Any] = []
    allowed: list[str] = []
    for name in sorted(names):
        # Before its existence is looked at: a refused topic is not revealed to exist.
        if authorize(ctx, AclOperation.DESCRIBE, TOPIC, name):
            allowed.append(name)
        elif not every:
            refused.append(topic_error(name, ErrorCode.topic_authorization_failed))

    remaining = max(min(MAX_PARTITIONS_PER_RESPONSE, request.response_partition_limit), 1)
    answers: list[Any] = []
    next_cursor: Any = None
    for name in allowed:
        if remaining == 0:
            # Every partition of the topics before is answered: the next call starts here.
            next_cursor = make(cls(ctx, "Cursor"), topic_name=name, partition_index=0)
            break
        t = await topics.lookup(name)
        if t is None:
            if not every:
                try:
                    check_topic_name(name)
                    code = ErrorCode.unknown_topic_or_partition
                except InvalidTopic:
                    code = ErrorCode.invalid_topic_exception
                answers.append(topic_error(name, code, operations(ctx, TOPIC, name)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        count = len(t.partitions)
        upper = min(count, start + remaining)
        answers.append(
            make(
                topic_cls,
                error_code=ErrorCode.none,
                name=name,
                topic_id=t.topic_id,
                is_internal=False,
                partitions=tuple(
                    make(
                        part_cls,
                        **partition_fields(ctx, p, real, leader_of),
                        eligible_leader_replicas=(),
                        last_known_elr=(),
                    )
                    for p in t.partitions[start:upper]
                ),
                topic_authorized_operations=operations(ctx, TOPIC, name),
            )
        )
        if upper < count:
            next_cursor = make(cls(ctx, "Cursor"), topic_name=name, partition_index=upper)
            break
        remaining -= max(upper - start, 0)
    return make(
        cls(ctx, "DescribeTopicPartitionsResponse"),
        throttle_time=NO_THROTTLE,
        topics=(*answers, *refused),
        next_cursor=next_cursor,
    )
