"""ListGroups (key 16), v0-5: the groups this node answers for, filtered by state (v4+)
and type (v5+).

As Kafka 3.9: each group with its protocol type ("consumer" for a KIP-848 group
and for a classic group of consumers, even once empty; "" for a simple group,
one made by offset commits alone), its state and (v5+) its type, "classic" or
"consumer" in lower case. Both filters ignore case (the state filter also
surrounding spaces); an unknown type matches no group.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.authz import GROUP, authorize, authorize_cluster
from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import NO_THROTTLE, cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make
from zonegate.services.api import AclOperation

API_KEY = 16


@REGISTRY.register(API_KEY, 0, 5)
async def handle(ctx: RequestContext, request: Any) -> Any:
    states = {s.strip().lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    cluster = ctx.services.cluster
    zone = ctx.client_zone
    me = cluster.node_id
    item = cls(ctx, "ListedGroup")
    groups = []
    # As Kafka: DESCRIBE on the cluster lists every group, else those the principal may
    # DESCRIBE, the others left out unlogged.
    every = authorize_cluster(ctx, AclOperation.DESCRIBE, log_denied=False)
    for g in await ctx.services.groups.list_groups():
        if not every and not authorize(
            ctx, AclOperation.DESCRIBE, GROUP, g.group_id, log_denied=False
        ):
            continue
        # Each group is listed by the node FindCoordinator names for it, as Kafka lists
        # each group on its coordinator only (admin clients ask every broker).
        found = cluster.coordinator_for(g.group_id, zone, ctx.listener)
        if found is not None and found.node_id != me:
            continue
        if states and g.state.lower() not in states:
            continue
        if types and g.group_type.lower() not in types:
            continue
        groups.append(
            make(
                item,
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
        )
    return make(
        cls(ctx, "ListGroupsResponse"),
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(groups),
    )
