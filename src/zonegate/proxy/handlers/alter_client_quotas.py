"""AlterClientQuotas (key 49, v0-1): set or remove quotas of users, client ids, both, and
their defaults; kept in the metadata store, applied by every node.

Each entry is checked alone, as Kafka's controller checks it (services/quotas.py):
an entry in error changes nothing and the others still apply. `validate_only`
checks and changes nothing.
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
from zonegate.services.api import AclOperation, QuotaChange


@REGISTRY.register(49, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    entries = [
        (
            [(e.entity_type, e.entity_name) for e in entry.entity],
            [QuotaChange(op.key, float(op.value), bool(op.remove)) for op in entry.ops],
        )
        for entry in request.entries
    ]
    if authorize_cluster(ctx, AclOperation.ALTER_CONFIGS):
        results = await ctx.services.quotas.alter(entries, request.validate_only)
    else:  # as Kafka's KafkaApis: every entry refused
        results = [(ErrorCode.cluster_authorization_failed, None)] * len(entries)
    entity_cls, entry_cls = cls(ctx, "EntityData"), cls(ctx, "EntryData")
    return make(
        cls(ctx, "AlterClientQuotasResponse"),
        throttle_time=datetime.timedelta(milliseconds=ctx.throttle.ms),
        entries=tuple(
            make(
                entry_cls,
                error_code=code,
                error_message=message,
                entity=tuple(
                    make(entity_cls, entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ),
            )
            for entry, (code, message) in zip(request.entries, results, strict=True)
        ),
    )
