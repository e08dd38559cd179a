"""ListPartitionReassignments (key 46), v0: the reassignments in progress.

There are none: a reassignment moves no data here and is done when
AlterPartitionReassignments answers (services/reassignment.py). Kafka lists
nothing for a topic or partition it does not know, without an error; so here.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 46


@REGISTRY.register(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = authorize_cluster(ctx, AclOperation.DESCRIBE)
    return make(
        cls(ctx, "ListPartitionReassignmentsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none if allowed else ErrorCode.cluster_authorization_failed,
        error_message=None,
        topics=(),
    )
