"""DescribeProducers (key 61), v0: the producers each partition's leader remembers
(KIP-664): producer id, epoch, last sequence, last timestamp, the coordinator epoch of
its last marker, and the first offset of its transaction open there.

As Kafka 4's KafkaApis, per topic: an invalid name INVALID_TOPIC_EXCEPTION, a topic the
principal may not READ TOPIC_AUTHORIZATION_FAILED, an unknown one
UNKNOWN_TOPIC_OR_PARTITION, for each partition asked. The admin client sends it to the
leader Metadata names; with zone routing that is a node of the client's zone, which
asks the real leader (a leader-owned read, services/txn_admin.py). -1 stands for what
the leader does not know (the timestamps of producers loaded by a new leader, which
keeps them only in memory).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, InvalidTopic, check_topic_name

API_KEY = 61


def _topic_error(ctx: RequestContext, name: str) -> tuple[ErrorCode, str | None]:
    try:
        check_topic_name(name)
    except InvalidTopic as exc:
        return ErrorCode.invalid_topic_exception, str(exc)
    if not authorize(ctx, AclOperation.READ, TOPIC, name):
        return ErrorCode.topic_authorization_failed, None
    if ctx.services.topics.get(name) is None:
        return ErrorCode.unknown_topic_or_partition, None
    return ErrorCode.none, None


async def _partition(ctx: RequestContext, topic: str, index: int) -> Any:
    error, producers = await ctx.services.txn_admin.producers(topic, index)
    state_cls = cls(ctx, "ProducerState")
    return make(
        cls(ctx, "PartitionResponse"),
        partition_index=index,
        error_code=error,
        error_message=None,
        active_producers=tuple(
            make(
                state_cls,
                producer_id=p.producer_id,
                producer_epoch=p.epoch,
                last_sequence=p.last_sequence,
                last_timestamp=p.last_timestamp,
                coordinator_epoch=p.coordinator_epoch,
                current_txn_start_offset=p.txn_start_offset,
            )
            for p in producers
        ),
    )


@REGISTRY.register(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    part_cls = cls(ctx, "PartitionResponse")
    topics = []
    for t in request.topics:
        error, message = _topic_error(ctx, t.name)
        if error != ErrorCode.none:
            partitions = tuple(
                make(
                    part_cls,
                    partition_index=i,
                    error_code=error,
                    error_message=message,
                    active_producers=(),
                )
                for i in t.partition_indexes
            )
        else:
            partitions = tuple([await _partition(ctx, t.name, i) for i in t.partition_indexes])
        topics.append(make(cls(ctx, "TopicResponse"), name=t.name, partitions=partitions))
    return make(
        cls(ctx, "DescribeProducersResponse"), throttle_time=NO_THROTTLE, topics=tuple(topics)
    )
