"""Small shared pieces of the handlers: the versioned response classes, zero throttle,
and the per-partition error for a partition its leader cannot answer for."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.grpc_client import LeaderUnavailable
from zonegate.proxy.context import RequestContext
from zonegate.proxy.schema import response_class
from zonegate.storage.index import UnknownStream

NO_THROTTLE = datetime.timedelta(0)


def cls(ctx: RequestContext, name: str) -> type[Any]:
    """The response class `name` of the request's API at the request's version."""
    return response_class(ctx.api_key, ctx.api_version, name)


def partition_error(exc: UnknownStream | LeaderUnavailable) -> ErrorCode:
    """The error a partition answers with when its leader could not serve it: deleted
    meanwhile (UNKNOWN_TOPIC_OR_PARTITION), or its leader out of reach after the
    directory's retries (NOT_LEADER_OR_FOLLOWER: the client refreshes metadata and
    retries, as with Kafka)."""
    if isinstance(exc, UnknownStream):
        return ErrorCode.unknown_topic_or_partition
    return ErrorCode.not_leader_or_follower
