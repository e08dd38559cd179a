"""DescribeUserScramCredentials (key 50, v0): no user has SCRAM credentials here.

zonegate authenticates no one by SASL/SCRAM, so there are none to describe:
each user named gets Kafka's answer for a user without credentials
(RESOURCE_NOT_FOUND, with its message), and a request naming none gets an
empty list. kafka-configs asks it whenever it describes users
(`--entity-type users --describe`), beside their quotas, and ignores that
error, as against a Kafka cluster whose users have no SCRAM credentials.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make


@REGISTRY.register(50, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    result = cls(ctx, "DescribeUserScramCredentialsResult")
    results = tuple(
        make(
            result,
            user=u.name,
            error_code=ErrorCode.resource_not_found,
            error_message=f"Attempt to describe a user credential that does not exist: {u.name}",
            credential_infos=(),
        )
        for u in request.users or ()
    )
    return make(
        cls(ctx, "DescribeUserScramCredentialsResponse"),
        throttle_time=datetime.timedelta(milliseconds=ctx.throttle.ms),
        error_code=ErrorCode.none,
        error_message=None,
        results=results,
    )
