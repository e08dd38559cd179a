"""Shared by the group handlers: timeouts in ms, group id checks."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode


def ms(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def group_id_error(group_id: str | None) -> ErrorCode:
    """Kafka refuses an empty or missing group id on the group protocol's calls."""
    return ErrorCode.invalid_group_id if not group_id else ErrorCode.none
