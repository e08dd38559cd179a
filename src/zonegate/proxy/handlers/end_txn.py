"""EndTxn (key 26), v0-5: a producer commits or aborts its transaction.

Needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). The
coordinator of the id's shard (services/txn_routing.py) makes the decision durable,
answers, then writes the markers. v5 says the producer speaks transaction version 2
(KIP-890 part 2): the epoch is bumped at the end of every transaction and the answer
carries the producer id and epoch to use next, as Kafka 4's KafkaApis
(`clientTransactionVersion`). Before v2 PRODUCER_FENCED is answered
INVALID_PRODUCER_EPOCH, which older clients know.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TRANSACTIONAL_ID, authorize
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, TransactionVersion

API_KEY = 26


@REGISTRY.register(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = cls(ctx, "EndTxnResponse")
    tid = request.transactional_id
    if not authorize(ctx, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        return make(
            answer,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
        )
    version = TransactionVersion.TV_2 if ctx.api_version > 4 else TransactionVersion.TV_0
    result = await ctx.services.transactions.end_txn(
        tid, request.producer_id, request.producer_epoch, bool(request.committed), version
    )
    error = result.error
    if ctx.api_version < 2 and error == ErrorCode.producer_fenced:
        error = ErrorCode.invalid_producer_epoch
    return make(
        answer,
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
