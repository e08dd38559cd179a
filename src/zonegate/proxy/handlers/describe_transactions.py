"""DescribeTransactions (key 65), v0: each transactional id's state, as its coordinator
holds it (KIP-664).

As Kafka 4's KafkaApis: an id the principal may not DESCRIBE answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and the partitions of a described transaction
are listed only for the topics the principal may DESCRIBE. The description comes from
the owner of the id's shard, wherever the admin client's request landed
(services/txn_admin.py); NOT_COORDINATOR when no owner is in reach, and the client
finds the coordinator again. An error answers Kafka's defaults (0, "") for the rest.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, TRANSACTIONAL_ID, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, TxnDescription

API_KEY = 65


def start_time(ms: int) -> datetime.datetime:
    """Kafka's transaction start time in ms (-1: none open) as kio's datetime_i64."""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


async def _describe(ctx: RequestContext, transactional_id: str) -> Any:
    state_cls = cls(ctx, "TransactionState")
    if not authorize(ctx, AclOperation.DESCRIBE, TRANSACTIONAL_ID, transactional_id):
        d = TxnDescription(transactional_id, ErrorCode.transactional_id_authorization_failed)
    else:
        d = await ctx.services.txn_admin.describe(transactional_id)
    ok = d.error == ErrorCode.none
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(d.partitions):
        by_topic[topic].append(partition)
    topics = tuple(
        make(cls(ctx, "TopicData"), topic=t, partitions=tuple(ps))
        for t, ps in by_topic.items()
        if authorize(ctx, AclOperation.DESCRIBE, TOPIC, t)
    )
    return make(
        state_cls,
        error_code=d.error,
        transactional_id=transactional_id,
        transaction_state=d.state if ok else "",
        transaction_timeout=datetime.timedelta(milliseconds=d.timeout_ms if ok else 0),
        transaction_start_time=start_time(d.start_ms if ok else 0),
        producer_id=d.producer_id if ok else 0,
        producer_epoch=d.producer_epoch if ok else 0,
        topics=topics if ok else (),
    )


@REGISTRY.register(API_KEY, 0, 0)
async def handle(ctx: RequestContext, request: Any) -> Any:
    return make(
        cls(ctx, "DescribeTransactionsResponse"),
        throttle_time=NO_THROTTLE,
        transaction_states=tuple([await _describe(ctx, tid) for tid in request.transactional_ids]),
    )
