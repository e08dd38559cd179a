"""AddPartitionsToTxn (key 24), v0-5: partitions joining a producer's transaction.

v0-3 come from producers: one transaction, which needs WRITE on its transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic. v4-5 (KIP-890) batch
transactions and may ask only whether the partitions are in them (`verify_only`); as
in Kafka they come from brokers, so they need CLUSTER_ACTION (else the whole answer is
CLUSTER_AUTHORIZATION_FAILED) and no topic check. As Kafka's KafkaApis: a partition of a
topic refused (TOPIC_AUTHORIZATION_FAILED) or unknown (UNKNOWN_TOPIC_OR_PARTITION) fails
the whole transaction's request, its other partitions answered OPERATION_NOT_ATTEMPTED;
otherwise the coordinator's one answer is every partition's (PRODUCER_FENCED given as
INVALID_PRODUCER_EPOCH before v2), and a verification answers partition by partition.
The coordinator is the owner of the id's shard (services/txn_routing.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, TRANSACTIONAL_ID, authorize, authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 24
E = ErrorCode
Partition = tuple[str, int]


@REGISTRY.register(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = cls(ctx, "AddPartitionsToTxnResponse")
    if ctx.api_version < 4:
        errors = await _transaction(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            request.v3_and_below_topics,
            verify_only=False,
        )
        return make(
            answer, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=_topics(ctx, errors)
        )
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return make(
            answer,
            throttle_time=NO_THROTTLE,
            error_code=E.cluster_authorization_failed,
            results_by_transaction=(),
        )
    txns = request.transactions
    results = await asyncio.gather(
        *(
            _transaction(
                ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only
            )
            for t in txns
        )
    )
    result_cls = cls(ctx, "AddPartitionsToTxnResult")
    return make(
        answer,
        throttle_time=NO_THROTTLE,
        error_code=E.none,
        results_by_transaction=tuple(
            make(result_cls, transactional_id=t.transactional_id, topic_results=_topics(ctx, r))
            for t, r in zip(txns, results, strict=True)
        ),
    )


def _topics(ctx: RequestContext, errors: dict[Partition, ErrorCode]) -> tuple[Any, ...]:
    topic_cls = cls(ctx, "AddPartitionsToTxnTopicResult")
    part_cls = cls(ctx, "AddPartitionsToTxnPartitionResult")
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append((partition, error))
    return tuple(
        make(
            topic_cls,
            name=topic,
            results_by_partition=tuple(
                make(part_cls, partition_index=p, partition_error_code=e) for p, e in parts
            ),
        )
        for topic, parts in by_topic.items()
    )


async def _transaction(
    ctx: RequestContext,
    tid: str,
    producer_id: int,
    producer_epoch: int,
    topics: Any,
    verify_only: bool,
) -> dict[Partition, ErrorCode]:
    """Each partition's answer for one transaction of the request."""
    wanted: list[Partition] = list(
        dict.fromkeys((t.name, int(p)) for t in topics for p in t.partitions)
    )
    client = ctx.api_version < 4
    if client and not authorize(ctx, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        return dict.fromkeys(wanted, E.transactional_id_authorization_failed)
    allowed = (
        {t for t, _ in wanted if authorize(ctx, AclOperation.WRITE, TOPIC, t)}
        if client
        else {t for t, _ in wanted}
    )
    failed: dict[Partition, ErrorCode] = {}
    for topic, partition in wanted:
        info = await ctx.services.topics.lookup(topic)
        if topic not in allowed:
            failed[(topic, partition)] = E.topic_authorization_failed
        elif info is None or not 0 <= partition < len(info.partitions):
            failed[(topic, partition)] = E.unknown_topic_or_partition
    if failed:
        return {tp: failed.get(tp, E.operation_not_attempted) for tp in wanted}
    txns = ctx.services.transactions
    if verify_only:
        verified = await txns.verify_partitions(tid, producer_id, producer_epoch, wanted)
        return {tp: verified.get(tp, E.none) for tp in wanted}
    result = await txns.add_partitions(tid, producer_id, producer_epoch, wanted)
    error = result.error
    if ctx.api_version < 2 and error == E.producer_fenced:
        error = E.invalid_producer_epoch
    return dict.fromkeys(wanted, error)
