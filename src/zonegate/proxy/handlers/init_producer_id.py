"""InitProducerId (key 22), v0-5: producer ids for idempotent and transactional producers.

A new idempotent producer gets a fresh id at epoch 0; one that names its current id and
epoch (KIP-360, v3+) gets the same id with the epoch bumped, which fences its older self.
With an authorizer, an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE
on some topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED, as Kafka's KafkaApis.

A transactional id needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and is
answered by the transaction coordinator of its shard (services/txn_routing.py): a new
epoch (or id) that fences any older producer of the id, the open transaction aborted
first, `transaction.timeout.ms` checked against `transaction.max.timeout.ms`
(INVALID_TRANSACTION_TIMEOUT). As Kafka: a producer id without an epoch (or the reverse)
is INVALID_REQUEST, and before v4 PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH,
which older clients know.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, TRANSACTIONAL_ID, authorize, authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.groups_common import ms
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 22
_MAX_EPOCH = 32767


@REGISTRY.register(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = cls(ctx, "InitProducerIdResponse")

    def reply(error: ErrorCode, pid: int = -1, epoch: int = -1) -> Any:
        return make(
            answer,
            throttle_time=NO_THROTTLE,
            error_code=error,
            producer_id=pid,
            producer_epoch=epoch,
        )

    tid = request.transactional_id
    if tid is not None:
        if not authorize(ctx, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
            return reply(ErrorCode.transactional_id_authorization_failed)
        return await _transactional(ctx, request, tid, reply)
    authorizer = ctx.services.authorizer
    if not authorize_cluster(
        ctx, AclOperation.IDEMPOTENT_WRITE, log_denied=False
    ) and not authorizer.authorize_by_resource_type(
        ctx.principal, ctx.client.host, AclOperation.WRITE, TOPIC
    ):
        return reply(ErrorCode.cluster_authorization_failed)
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        new_pid, new_epoch = pid, epoch + 1
    else:
        new_pid, new_epoch = await ctx.services.produce.allocate_producer_id(), 0
    return reply(ErrorCode.none, new_pid, new_epoch)


async def _transactional(
    ctx: RequestContext, request: Any, tid: str, reply: Callable[..., Any]
) -> Any:
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if (pid == -1) != (epoch == -1):
        return reply(ErrorCode.invalid_request)
    expected = None if pid == -1 else (pid, epoch)
    result = await ctx.services.transactions.init_producer_id(
        tid, ms(request.transaction_timeout), expected
    )
    error = result.error
    if ctx.api_version < 4 and error == ErrorCode.producer_fenced:
        error = ErrorCode.invalid_producer_epoch
    return reply(error, result.producer_id, result.producer_epoch)
