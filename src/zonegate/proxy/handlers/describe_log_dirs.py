"""DescribeLogDirs (key 35), v0-4: the node's one log directory and its partitions' sizes.

Every version Kafka 3.9 accepts: v1 is v0's format (Kafka 4.0 removed v0,
answered here from its 3.9 schema, proxy/legacy_schema), v2 is flexible, v3
adds the top-level error code, v4 the volume's total and usable bytes. Each
node answers for itself, as a Kafka broker does (the admin client asks every
broker it is told of): one log directory, the object store's location,
holding the partitions the client is told this node leads (of the topics
asked; every one for a null list), each sized by the bytes of its stored
batches, offset lag 0, never a future log (services/log_dirs.py). The
object store has no volume to measure, so total and usable bytes are -1,
Kafka's "unknown". docs/compatibility.md says what the answer means here.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation, PartitionSize

API_KEY = 35


@REGISTRY.register(API_KEY, 0, 4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = (
        None
        if request.topics is None
        else {t.topic: tuple(int(p) for p in t.partitions) for t in request.topics}
    )
    log_dirs = ctx.services.log_dirs
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return make(
            cls(ctx, "DescribeLogDirsResponse"),
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )
    sizes = await log_dirs.sizes(wanted, ctx.client_zone)
    by_topic: dict[str, list[PartitionSize]] = {}
    for s in sizes:
        by_topic.setdefault(s.topic, []).append(s)
    part_cls = cls(ctx, "DescribeLogDirsPartition")
    topics = tuple(
        make(
            cls(ctx, "DescribeLogDirsTopic"),
            name=name,
            partitions=tuple(
                make(
                    part_cls,
                    partition_index=s.partition,
                    partition_size=s.size_bytes,
                    offset_lag=0,
                    is_future_key=False,
                )
                for s in parts
            ),
        )
        for name, parts in by_topic.items()
    )
    result = make(
        cls(ctx, "DescribeLogDirsResult"),
        error_code=ErrorCode.none,
        log_dir=log_dirs.log_dir,
        topics=topics,
        total_bytes=-1,
        usable_bytes=-1,
    )
    return make(
        cls(ctx, "DescribeLogDirsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=(result,),
    )
