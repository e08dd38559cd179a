"""DescribeCluster (key 60), v0-1: the client's zone's nodes, the cluster id, and the node
to send admin requests to (see metadata.brokers_and_controller). The cluster's
authorized operations (KIP-430) when asked: 0 without DESCRIBE on the cluster, as
Kafka's KafkaApis answers."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import CLUSTER, CLUSTER_NAME, authorize_cluster, operations
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.handlers.metadata import brokers_and_controller
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 60


@REGISTRY.register(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    brokers, controller = brokers_and_controller(ctx, cls(ctx, "DescribeClusterBroker"))
    cluster_operations = -2147483648  # the schema's default: not asked
    if request.include_cluster_authorized_operations:
        cluster_operations = (
            operations(ctx, CLUSTER, CLUSTER_NAME)
            if authorize_cluster(ctx, AclOperation.DESCRIBE)
            else 0
        )
    return make(
        cls(ctx, "DescribeClusterResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.services.cluster.cluster_id,
        controller_id=controller,
        brokers=brokers,
        cluster_authorized_operations=cluster_operations,
    )
