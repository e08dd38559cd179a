"""TxnOffsetCommit (key 28), v0-5: a group's offsets committed within a transaction.

As Kafka's KafkaApis: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
READ on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic (a refused topic's
partitions TOPIC_AUTHORIZATION_FAILED, an unknown one's UNKNOWN_TOPIC_OR_PARTITION, the
rest committed). Then, as Kafka 4's group coordinator, the group's `__consumer_offsets`
partition must be in the producer's transaction (KIP-890): v5 (transaction version 2)
adds it on the producer's behalf, older versions ask the coordinator whether
AddOffsetsToTxn added it. A refusal is translated as Kafka translates it (fenced:
INVALID_PRODUCER_EPOCH; a coordinator busy or moving: COORDINATOR_NOT_AVAILABLE, which
producers retry). The offsets are then pending under the producer's id at the group's
coordinator (services/groups.py `txn_commit_offsets`), the group's only when the
transaction commits. v3+ carry the member's generation, checked as OffsetCommit's. Before
v2, COORDINATOR_LOAD_IN_PROGRESS is answered COORDINATOR_NOT_AVAILABLE (KAFKA-7296).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, TOPIC, TRANSACTIONAL_ID, authorize, authorized_by_name
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import (
    OFFSETS_TOPIC,
    group_id_error,
    offsets_partition,
    topic_partition_errors,
)
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, OffsetToCommit, TransactionVersion
from zonegate.transactions.verification import produce_error

API_KEY = 28
E = ErrorCode


@REGISTRY.register(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    offsets = [
        OffsetToCommit(
            t.name,
            p.partition_index,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
            -1,
        )
        for t in request.topics
        for p in t.partitions
    ]
    errors = await _commit(ctx, request, offsets)
    if ctx.api_version < 2:
        errors = [
            E.coordinator_not_available if e == E.coordinator_load_in_progress else e
            for e in errors
        ]
    return make(
        cls(ctx, "TxnOffsetCommitResponse"),
        throttle_time=NO_THROTTLE,
        topics=topic_partition_errors(ctx, request.topics, errors, "TxnOffsetCommitResponse"),
    )


async def _commit(
    ctx: RequestContext, request: Any, offsets: list[OffsetToCommit]
) -> list[ErrorCode]:
    tid, group = request.transactional_id, request.group_id
    if not authorize(ctx, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        return [E.transactional_id_authorization_failed] * len(offsets)
    if not authorize(ctx, AclOperation.READ, GROUP, group):
        return [E.group_authorization_failed] * len(offsets)
    allowed = authorized_by_name(ctx, AclOperation.READ, TOPIC, request.topics, lambda t: t.name)
    errors: list[ErrorCode | None] = []
    for o in offsets:
        info = await ctx.services.topics.lookup(o.topic)
        if o.topic not in allowed:
            errors.append(E.topic_authorization_failed)
        elif info is None or not 0 <= o.partition < len(info.partitions):
            errors.append(E.unknown_topic_or_partition)
        else:
            errors.append(None)
    valid = [o for o, e in zip(offsets, errors, strict=True) if e is None]
    if not valid:
        return [e or E.none for e in errors]
    error = group_id_error(group)
    if error == E.none:
        error = await _verify(ctx, request, tid, offsets_partition(group))
    committed: list[ErrorCode] = [error] * len(valid)
    if error == E.none:
        committed = await ctx.services.groups.txn_commit_offsets(
            group,
            request.producer_id,
            offsets_partition(group),
            getattr(request, "generation_id", -1),
            getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None),
            valid,
        )
    done = iter(committed)
    return [e if e is not None else next(done) for e in errors]


async def _verify(ctx: RequestContext, request: Any, tid: str, partition: int) -> ErrorCode:
    """Whether the group's offsets partition is in the transaction (v5: added to it)."""
    txns, tp = ctx.services.transactions, (OFFSETS_TOPIC, partition)
    pid, epoch = request.producer_id, request.producer_epoch
    if ctx.api_version >= 5:
        error = (await txns.add_partitions(tid, pid, epoch, [tp], TransactionVersion.TV_2)).error
    else:
        error = (await txns.verify_partitions(tid, pid, epoch, [tp])).get(tp, E.invalid_txn_state)
    if error == E.none:
        return error
    # As a produce's verification (v4 knows TRANSACTION_ABORTABLE, as Produce v11), then
    # the group coordinator's mapping of a retriable append error.
    translated = produce_error(error, 11 if ctx.api_version >= 4 else 10)[0]
    return E.coordinator_not_available if translated == E.not_enough_replicas else translated
