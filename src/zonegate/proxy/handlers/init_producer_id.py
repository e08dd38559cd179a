"""InitProducerId (key 22), v0-5: producer ids for idempotent producers.

A new producer gets a fresh id at epoch 0. A producer that names its current
id and epoch (KIP-360, v3+) gets the same id with the epoch bumped, which
fences its older self. Transactions are not served: a transactional id is
refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and a message saying so. With an
authorizer, an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on
some topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED, as Kafka's KafkaApis.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import TOPIC, authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 22
_MAX_EPOCH = 32767


@REGISTRY.register(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = cls(ctx, "InitProducerIdResponse")
    if request.transactional_id is not None:
        return make(
            answer,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
        )
    authorizer = ctx.services.authorizer
    if not authorize_cluster(
        ctx, AclOperation.IDEMPOTENT_WRITE, log_denied=False
    ) and not authorizer.authorize_by_resource_type(
        ctx.principal, ctx.client.host, AclOperation.WRITE, TOPIC
    ):
        return make(
            answer,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
        )
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        new_pid, new_epoch = pid, epoch + 1
    else:
        new_pid, new_epoch = await ctx.services.produce.allocate_producer_id(), 0
    return make(
        answer,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=new_pid,
        producer_epoch=new_epoch,
    )
