"""WriteTxnMarkers (key 27), v0-1: the admin's abort of a hanging transaction
(`kafka-transactions abort`, Admin.abortTransaction, KIP-664).

In Kafka this is also how a transaction coordinator writes its markers to other brokers;
here a node's coordinator writes them through its own WAL and the leaders
(services/txn_markers.py), so a client's WriteTxnMarkers is only ever an admin's abort.
As Kafka 4's KafkaApis, it needs ALTER on the cluster, else CLUSTER_ACTION (denied:
CLUSTER_AUTHORIZATION_FAILED for every partition). Each marker is an abort written
through the coordinator's marker path at each partition where the producer has a
transaction open, checked by the leader as the coordinator's markers are (an older
producer epoch INVALID_PRODUCER_EPOCH, an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED); where none is open nothing is written and the answer
is NONE. A commit marker (transaction_result true) is INVALID_REQUEST: committing
records the coordinator may never have known of is not an operator's act. Answers are
grouped by producer id, as Kafka's.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 27


def _allowed(ctx: RequestContext) -> bool:
    return authorize_cluster(ctx, AclOperation.ALTER, log_denied=False) or authorize_cluster(
        ctx, AclOperation.CLUSTER_ACTION
    )


@REGISTRY.register(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = _allowed(ctx)
    # producer id -> (topic, partition) -> error; merged as Kafka's map of maps.
    results: dict[int, dict[tuple[str, int], ErrorCode]] = {}
    for m in request.markers:
        parts = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        if not allowed:
            errors = dict.fromkeys(parts, ErrorCode.cluster_authorization_failed)
        elif m.transaction_result:
            errors = dict.fromkeys(parts, ErrorCode.invalid_request)
        else:
            errors = await ctx.services.txn_admin.abort(
                m.producer_id, m.producer_epoch, m.coordinator_epoch, parts
            )
        results.setdefault(m.producer_id, {}).update(errors)
    part_cls = cls(ctx, "WritableTxnMarkerPartitionResult")
    answers = []
    for pid, errors in results.items():
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), error in errors.items():
            by_topic.setdefault(topic, []).append(
                make(part_cls, partition_index=partition, error_code=error)
            )
        answers.append(
            make(
                cls(ctx, "WritableTxnMarkerResult"),
                producer_id=pid,
                topics=tuple(
                    make(cls(ctx, "WritableTxnMarkerTopicResult"), name=t, partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            )
        )
    return make(cls(ctx, "WriteTxnMarkersResponse"), markers=tuple(answers))
