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
v0's answer has no epoch, only the end offset.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.grpc_client import LeaderUnavailable
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls, partition_error
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.storage.index import UnknownStream

API_KEY = 23
UNDEFINED = -1


async def _end_offset(
    ctx: RequestContext, stream_id: int, current_epoch_seen: int, epoch: int
) -> tuple[ErrorCode, int, int]:
    """(error, epoch, end offset) for one partition."""
    try:
        _, hwm, current = await ctx.node.leader.offsets(stream_id)
    except (UnknownStream, LeaderUnavailable) as exc:
        return partition_error(exc), UNDEFINED, UNDEFINED
    if current_epoch_seen >= 0 and current_epoch_seen != current:
        # The client's metadata is older (or newer) than the leader's epoch: as Kafka,
        # fence it so that it refreshes metadata and asks again.
        if current_epoch_seen < current:
            return ErrorCode.fenced_leader_epoch, UNDEFINED, UNDEFINED
        return ErrorCode.unknown_leader_epoch, UNDEFINED, UNDEFINED
    if epoch == current:
        return ErrorCode.none, current, hwm
    if epoch < 0 or epoch > current:
        return ErrorCode.none, UNDEFINED, UNDEFINED
    found = await ctx.node.meta.epoch_end_offset(stream_id, epoch)
    if found is None:
        # A store made before epochs were recorded: nothing was ever truncated, so the
        # epoch's records all lie below the high watermark.
        return ErrorCode.none, epoch, hwm
    return ErrorCode.none, found[0], found[1]


@REGISTRY.register(API_KEY, 0, 4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    part_cls = cls(ctx, "EpochEndOffset")
    topics = []
    for t in request.topics:
        topic = await ctx.node.catalog.lookup(t.topic)
        answers = []
        for p in t.partitions:
            if topic is None or not 0 <= p.partition < len(topic.partitions):
                err, epoch, end = ErrorCode.unknown_topic_or_partition, UNDEFINED, UNDEFINED
            else:
                sid = topic.partitions[p.partition].stream_id
                err, epoch, end = await _end_offset(
                    ctx, sid, getattr(p, "current_leader_epoch", -1), p.leader_epoch
                )
            answers.append(
                make(
                    part_cls,
                    error_code=err,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end,
                )
            )
        topics.append(
            make(cls(ctx, "OffsetForLeaderTopicResult"), topic=t.topic, partitions=tuple(answers))
        )
    return make(
        cls(ctx, "OffsetForLeaderEpochResponse"), throttle_time=NO_THROTTLE, topics=tuple(topics)
    )
