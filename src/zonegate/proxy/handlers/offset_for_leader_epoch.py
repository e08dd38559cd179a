"""OffsetForLeaderEpoch (key 23), v0-4: where a leader epoch ended (KIP-101, KIP-320).

Consumers ask it after a partition's leader epoch changes (kafka-python 3,
librdkafka, the Java client) to check that their position was not truncated
away: an end offset below the position means truncation. Zonegate never
truncates acknowledged records, and every batch is stamped on the way out with
the epoch of the leader that served it, so the honest answers are Kafka's:
the current epoch ends at the high watermark; an older one at the first offset
of the epoch after it, which the metadata store records at every leader move.
Without this API those clients stop fetching the partition for good after its
leader moves (kafka-python logs IncompatibleBrokerVersion and retries forever).

v0-1 carry no current leader epoch, so nothing is fenced (as in Kafka 3.9);
v0's answer has no epoch, only the end offset. A topic the principal may not
DESCRIBE gets TOPIC_AUTHORIZATION_FAILED on each partition, as Kafka's KafkaApis.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, OffsetAnswer

API_KEY = 23


@REGISTRY.register(API_KEY, 0, 4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    part_cls = cls(ctx, "EpochEndOffset")
    topics = []
    allowed = authorized_by_name(
        ctx, AclOperation.DESCRIBE, TOPIC, request.topics, lambda t: t.topic
    )
    refused = OffsetAnswer(ErrorCode.topic_authorization_failed)
    for t in request.topics:
        answers = []
        for p in t.partitions:
            a = (
                await ctx.services.fetch.epoch_end(
                    t.topic, p.partition, getattr(p, "current_leader_epoch", -1), p.leader_epoch
                )
                if t.topic in allowed
                else refused
            )
            answers.append(
                make(
                    part_cls,
                    error_code=a.error,
                    partition=p.partition,
                    leader_epoch=a.leader_epoch,
                    end_offset=a.offset,
                )
            )
        topics.append(
            make(cls(ctx, "OffsetForLeaderTopicResult"), topic=t.topic, partitions=tuple(answers))
        )
    return make(
        cls(ctx, "OffsetForLeaderEpochResponse"), throttle_time=NO_THROTTLE, topics=tuple(topics)
    )
