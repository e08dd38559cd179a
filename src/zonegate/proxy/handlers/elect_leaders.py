"""ElectLeaders (key 43), v0-2: preferred (v0 has only it) or unclean leader election.

Preferred: a partition goes back to its preferred node (the first replica) when
that node is live; ELECTION_NOT_NEEDED when it leads already,
PREFERRED_LEADER_NOT_AVAILABLE when it is not live. Unclean: only a partition
whose leader is not live needs one. A null list of partitions means all of
them, and then those needing no election are left out of the answer, as Kafka
does. Each move is the controller's: a leader epoch bump, no data copied
(services/reassignment.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import PREFERRED, AclOperation, Outcome, TopicPartition

API_KEY = 43


@REGISTRY.register(API_KEY, 0, 2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    election_type = int(getattr(request, "election_type", PREFERRED))
    wanted: list[TopicPartition] | None = None
    if request.topic_partitions is not None:
        wanted = [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return make(
            cls(ctx, "ElectLeadersResponse"),
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            replica_election_results=(),
        )
    results = await ctx.services.leadership.elect(election_type, wanted)
    by_topic: dict[str, list[tuple[int, Outcome]]] = {}
    if request.topic_partitions is not None:
        for t in request.topic_partitions:  # every topic asked for, in the order asked
            by_topic.setdefault(t.topic, [])
    for (topic, index), outcome in results:
        by_topic.setdefault(topic, []).append((index, outcome))
    part_cls = cls(ctx, "PartitionResult")
    topic_cls = cls(ctx, "ReplicaElectionResult")
    return make(
        cls(ctx, "ElectLeadersResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        replica_election_results=tuple(
            make(
                topic_cls,
                topic=topic,
                partition_result=tuple(
                    make(part_cls, partition_id=i, error_code=o.error, error_message=o.message)
                    for i, o in parts
                ),
            )
            for topic, parts in by_topic.items()
        ),
    )
