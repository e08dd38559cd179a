"""AddOffsetsToTxn (key 25), v0-4: a consumer group's offsets joining a transaction.

As Kafka, the transaction gains the group's partition of `__consumer_offsets`
(`shard_for(group, 50)`, Kafka's partitionFor); its marker is what makes the offsets
TxnOffsetCommit wrote for the transaction the group's (here: the coordinator completes
the pending rows, txn_coordinator/shard_host.py). Needs WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
(GROUP_AUTHORIZATION_FAILED); before v2 PRODUCER_FENCED is answered
INVALID_PRODUCER_EPOCH, as Kafka's KafkaApis.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, TRANSACTIONAL_ID, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import OFFSETS_TOPIC, offsets_partition
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 25


@REGISTRY.register(API_KEY, 0, 4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = cls(ctx, "AddOffsetsToTxnResponse")
    tid, group = request.transactional_id, request.group_id
    if not authorize(ctx, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        error = ErrorCode.transactional_id_authorization_failed
    elif not authorize(ctx, AclOperation.READ, GROUP, group):
        error = ErrorCode.group_authorization_failed
    else:
        result = await ctx.services.transactions.add_partitions(
            tid,
            request.producer_id,
            request.producer_epoch,
            [(OFFSETS_TOPIC, offsets_partition(group))],
        )
        error = result.error
        if ctx.api_version < 2 and error == ErrorCode.producer_fenced:
            error = ErrorCode.invalid_producer_epoch
    return make(answer, throttle_time=NO_THROTTLE, error_code=error)
