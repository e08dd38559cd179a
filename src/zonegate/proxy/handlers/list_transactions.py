"""ListTransactions (key 66), v0-1: the transactions of the shards this node answers for,
filtered by state, producer id and (v1, KIP-994) duration.

A node lists the shards FindCoordinator sends its zone's clients to (each asked of its
owner, services/txn_admin.py), as ListGroups lists the groups it answers for: Kafka's
admin client asks every broker it is told of and merges the answers, so each shard is
listed once. The filters are Kafka's (transactions/coordinator_core.py): a state name
no state has is answered in `unknown_state_filters` and matches nothing; a duration
filter below 0 is none. As Kafka 4's KafkaApis, an id the principal may not DESCRIBE
is left out. A shard being taken over answers COORDINATOR_LOAD_IN_PROGRESS and no
listing, which the admin client retries.
"""

from __future__ import annotations

from typing import Any

from zonegate.proxy.authz import TRANSACTIONAL_ID, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 66


@REGISTRY.register(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    error, found, unknown = await ctx.services.txn_admin.list_transactions(
        ctx.client_zone,
        ctx.listener,
        list(request.producer_id_filters),
        list(request.state_filters),
        getattr(request, "duration_filter", -1),  # v1+
    )
    item = cls(ctx, "TransactionState")
    return make(
        cls(ctx, "ListTransactionsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=error,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            make(
                item,
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state,
            )
            for t in found
            if authorize(ctx, AclOperation.DESCRIBE, TRANSACTIONAL_ID, t.transactional_id)
        ),
    )
