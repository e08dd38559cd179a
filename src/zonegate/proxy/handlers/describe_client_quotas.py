"""DescribeClientQuotas (key 48, v0-1): the quotas set, filtered as Kafka filters them.

Components match an entity type exactly (a name), its default, or any name
(`match_type` 0, 1, 2); `strict` leaves out entities with other types besides.
A bad filter is the answer's error (INVALID_REQUEST, or UNSUPPORTED_VERSION for
an unknown entity type), with Kafka's message (services/quotas.py).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, QuotaFilter, QuotaRequestError


@REGISTRY.register(48, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    filters = [QuotaFilter(c.entity_type, c.match_type, c.match) for c in request.components]
    answer = cls(ctx, "DescribeClientQuotasResponse")
    throttle = datetime.timedelta(milliseconds=ctx.throttle.ms)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return make(
            answer,
            throttle_time=throttle,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=None,
            entries=None,
        )
    try:
        found = await ctx.services.quotas.describe(filters, request.strict)
    except QuotaRequestError as exc:
        return make(
            answer,
            throttle_time=throttle,
            error_code=exc.code,
            error_message=str(exc),
            entries=None,
        )
    entity_cls, value_cls = cls(ctx, "EntityData"), cls(ctx, "ValueData")
    entries = tuple(
        make(
            cls(ctx, "EntryData"),
            entity=tuple(make(entity_cls, entity_type=t, entity_name=n) for t, n in entity),
            values=tuple(make(value_cls, key=k, value=v) for k, v in sorted(values.items())),
        )
        for entity, values in found
    )
    return make(
        answer,
        throttle_time=throttle,
        error_code=ErrorCode.none,
        error_message=None,
        entries=entries,
    )
