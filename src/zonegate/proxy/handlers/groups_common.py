"""Shared by the group handlers: timeouts in ms, group id checks."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.schema import make


def ms(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


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
