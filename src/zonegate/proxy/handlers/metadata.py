"""Metadata (key 3), v0-12, rewritten per client zone by the router.

The client's zone is resolved (client.id tag, CIDR map, the node's zone); the
answer lists that zone's live nodes as the brokers, at their endpoints of the
listener the request came on (a node without that listener is left out, as Kafka
does), and a same-zone node as each partition's leader (rendezvous hashing), so
produce and fetch stay in the zone; each partition's replica list is then that
node alone. With routing off, or no live node in the zone, the real leaders, and
as replicas the partition's preferred node (the first, Kafka's preferred leader)
and its leader, live ones in sync, others offline (services/reassignment.py).
Topics asked for by name that do not exist are created when both the request
and `auto.create.topics.enable` allow it (as Kafka does); otherwise
UNKNOWN_TOPIC_OR_PARTITION. Invalid names get INVALID_TOPIC_EXCEPTION.

With an authorizer, as Kafka's KafkaApis.handleTopicMetadataRequest: a topic the
principal may not DESCRIBE is left out of an all-topics answer and answered
TOPIC_AUTHORIZATION_FAILED when named, without saying whether it exists; creating
one needs CREATE on the cluster or on the topic. Authorized operations (KIP-430)
are filled in when asked: the topics' (v8+) and the cluster's (v8-10).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import CLUSTER, TOPIC, authorize, authorize_cluster, operations
from zonegate.proxy.context import RequestContext
from zonegate.proxy.errors import PeerProtocolError
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import (
    AclOperation,
    InvalidTopic,
    PartitionInfo,
    TopicInfo,
    check_topic_name,
)

API_KEY = 3
ZERO_UUID = uuid.UUID(int=0)


def brokers_and_controller(
    ctx: RequestContext, broker_cls: type[Any]
) -> tuple[tuple[Any, ...], int]:
    """The nodes the client is told of, as `broker_cls` entries, and the controller id to
    name (services/cluster.py says why it is a node of the client's zone)."""
    cluster = ctx.services.cluster
    brokers = []
    for n in cluster.brokers_for(ctx.client_zone, ctx.listener):
        endpoint = n.endpoint(ctx.listener)
        if endpoint is None:  # it has no such listener (brokers_for leaves it out)
            continue
        host, port = endpoint
        brokers.append(
            make(
                broker_cls,
                node_id=n.node_id,
                broker_id=n.node_id,
                host=host,
                port=port,
                rack=n.zone,
            )
        )
    return tuple(brokers), cluster.controller_for(ctx.client_zone, ctx.listener)


def partition_fields(
    ctx: RequestContext, p: PartitionInfo, real: bool, leader_of: Callable[[PartitionInfo], int]
) -> dict[str, Any]:
    """A partition's leader, replicas, in-sync and offline replicas as this client is told
    them (the module doc); `real` when the cluster does not rewrite them for its zone;
    `leader_of` is the cluster's `leaders_for` this client's zone and listener, asked
    once per answer. DescribeTopicPartitions answers the same."""
    leader = leader_of(p)
    if real:
        replicas, isr, offline = ctx.services.leadership.replicas(p)
    else:
        replicas, isr, offline = (leader,), (leader,), ()
    return {
        "error_code": ErrorCode.none,
        "partition_index": p.partition,
        "leader_id": leader,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": replicas,
        "isr_nodes": isr,
        "offline_replicas": offline,
    }


@REGISTRY.register(API_KEY, 0, 12)
async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = ctx.services.topics
    cluster = ctx.services.cluster
    topic_cls = cls(ctx, "MetadataResponseTopic")
    part_cls = cls(ctx, "MetadataResponsePartition")

    zone = ctx.client_zone
    await cluster.check_zone(zone)  # a lost zone's client must not be sent back to it
    real = not cluster.rewrites(zone, ctx.listener)

    leader_of = cluster.leaders_for(zone, ctx.listener)

    def partition_answer(p: PartitionInfo) -> Any:
        return make(part_cls, **partition_fields(ctx, p, real, leader_of))

    with_operations = ctx.api_version >= 8 and getattr(
        request, "include_topic_authorized_operations", False
    )

    def topic_answer(t: TopicInfo) -> Any:
        return make(
            topic_cls,
            error_code=ErrorCode.none,
            name=t.name,
            topic_id=t.topic_id,
            is_internal=False,
            partitions=tuple(partition_answer(p) for p in t.partitions),
            topic_authorized_operations=(
                operations(ctx, TOPIC, t.name) if with_operations else -2147483648
            ),
        )

    def may_describe(name: str, *, log_denied: bool = True) -> bool:
        return authorize(ctx, AclOperation.DESCRIBE, TOPIC, name, log_denied=log_denied)

    def may_create(name: str) -> bool:
        return authorize_cluster(ctx, AclOperation.CREATE, log_denied=False) or authorize(
            ctx, AclOperation.CREATE, TOPIC, name
        )

    def topic_error(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> Any:
        return make(
            topic_cls,
            error_code=code,
            name=name,
            topic_id=topic_id,
            is_internal=False,
            partitions=(),
        )

    answers: list[Any] = []
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        # Kafka leaves out, unlogged, the topics the principal may not describe.
        answers = [
            topic_answer(t) for t in topics.topics() if may_describe(t.name, log_denied=False)
        ]
    else:
        allow_create = topics.auto_create and getattr(request, "allow_auto_topic_creation", True)
        for wanted in request.topics:
            name = wanted.name
            if name is None and ctx.api_version < 12:
                # Kafka refuses it (InvalidRequestException): topic ids are v12+ only.
                raise PeerProtocolError(
                    f"Metadata v{ctx.api_version} asks for a topic with a null name"
                )
            if name is None:
                by_id = await topics.by_id_fresh(wanted.topic_id)
                if by_id is None:
                    answers.append(topic_error(None, ErrorCode.unknown_topic_id, wanted.topic_id))
                elif not may_describe(by_id.name):
                    # Kafka: topic ids are not secret, so the error may name the id.
                    answers.append(
                        topic_error(None, ErrorCode.topic_authorization_failed, wanted.topic_id)
                    )
                else:
                    answers.append(topic_answer(by_id))
                continue
            try:
                check_topic_name(name)
            except InvalidTopic:
                answers.append(topic_error(name, ErrorCode.invalid_topic_exception))
                continue
            if not may_describe(name):
                # Before looking it up: a refused topic is not revealed to exist.
                answers.append(topic_error(name, ErrorCode.topic_authorization_failed))
                continue
            t = await topics.lookup(name)
            if t is None and allow_create:
                if not may_create(name):
                    answers.append(topic_error(name, ErrorCode.topic_authorization_failed))
                    continue
                t = await topics.get_or_create(name, topics.default_partitions)
            answers.append(
                topic_answer(t)
                if t is not None
                else topic_error(name, ErrorCode.unknown_topic_or_partition)
            )
    brokers, controller = brokers_and_controller(ctx, cls(ctx, "MetadataResponseBroker"))
    cluster_operations = -2147483648  # the schema's default: not asked
    if 8 <= ctx.api_version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = (
            operations(ctx, CLUSTER, "kafka-cluster")
            if authorize_cluster(ctx, AclOperation.DESCRIBE)
            else 0
        )
    return make(
        cls(ctx, "MetadataResponse"),
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=cluster.cluster_id,
        controller_id=controller,
        topics=tuple(answers),
        cluster_authorized_operations=cluster_operations,
    )
