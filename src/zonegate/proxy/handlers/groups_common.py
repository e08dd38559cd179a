"""Shared by the group handlers: timeouts in ms, group id checks."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.schema import make
from zonegate.transactions.states import shard_for


def ms(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


OFFSETS_TOPIC = "__consumer_offsets"
_OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions: Kafka's default


def offsets_partition(group_id: str) -> int:
    """The group's partition of `__consumer_offsets`, as Kafka's partitionFor computes it
    (transactions add it: AddOffsetsToTxn, TxnOffsetCommit v5)."""
    return shard_for(group_id, _OFFSETS_PARTITIONS)


def group_id_error(group_id: str | None) -> ErrorCode:
    """Kafka refuses an empty or missing group id on the group protocol's calls."""
    return ErrorCode.invalid_group_id if not group_id else ErrorCode.none


def topic_partition_errors(
    ctx: RequestContext, topics: Sequence[Any], errors: Sequence[ErrorCode], prefix: str
) -> tuple[Any, ...]:
    """`{prefix}Topic` entries echoing the request's topics and partitions, one error each
    (`errors` in the request's order)."""
    topic_cls = cls(ctx, f"{prefix}Topic")
    part_cls = cls(ctx, f"{prefix}Partition")
    it = iter(errors)
    return tuple(
        make(
            topic_cls,
            name=t.name,
            partitions=tuple(
                make(part_cls, partition_index=p.partition_index, error_code=next(it))
                for p in t.partitions
            ),
        )
        for t in topics
    )
