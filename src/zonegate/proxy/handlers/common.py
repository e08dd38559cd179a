"""Small shared pieces of the handlers: the versioned response classes, zero throttle, and
controller-mutation quotas."""

from __future__ import annotations

import datetime
from typing import Any

from zonegate.proxy.context import RequestContext
from zonegate.proxy.schema import response_class

NO_THROTTLE = datetime.timedelta(0)


def cls(ctx: RequestContext, name: str) -> type[Any]:
    """The response class `name` of the request's API at the request's version."""
    return response_class(ctx.api_key, ctx.api_version, name)


THROTTLED = "The throttling quota has been exceeded."  # Kafka's message for the error


def mutation_allowed(ctx: RequestContext, partitions: int, strict_since: int) -> bool:
    """Kafka's controller_mutation_rate for creating or deleting `partitions`: False when
    the client is over its quota and the request's version is strict (the topic fails
    with THROTTLING_QUOTA_EXCEEDED); older versions are let through and throttled."""
    quotas, client = ctx.services.quotas, ctx.client_id or ""
    strict = ctx.api_version >= strict_since
    ms = quotas.take_mutations(ctx.principal, client, partitions, strict)
    if ms < 0:
        ctx.throttle.at_least(quotas.mutation_throttle_ms(ctx.principal, client))
        return False
    ctx.throttle.at_least(ms)
    return True
