"""Handing a stopping node's work over at once, instead of after its lease runs out.

On SIGTERM the node stops accepting, answers what it read and uploads its open
WAL (node.py `_drain`); then `hand_over` moves every partition it leads to
the live nodes that are not stopping with it (balanced as the controller
places them, each move bumping the leader epoch so a late commit of ours is
fenced), and ends its lease, which hands its consumer groups over too: a
group's coordinator is chosen among live nodes, and the others see this node
gone at their next membership read (every heartbeat).

Nodes stopping together (`zonegate serve` stopping all of its nodes) hand
nothing to each other: with no node left to take them, the partitions stay
where they are, and the same nodes find them there when they start again (the
controller waits a lease after it starts before moving anything, controller.py).
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from zonegate.metastore.api import ClusterStore
from zonegate.metastore.models import TopicInfo
from zonegate.router.membership import Membership
from zonegate.router.placement import place

log = logging.getLogger(__name__)


async def hand_over(
    meta: ClusterStore,
    membership: Membership,
    topics: Collection[TopicInfo],
    stopping_with: Collection[int] = (),
) -> int:
    """Moves this node's partitions to the other live nodes and ends its lease; returns
    how many partitions moved."""
    me = membership.me.node_id
    gone = {me, *stopping_with}
    membership.leaving = True  # the lease keeper must not renew what we end below
    targets = [n for n in membership.leading_nodes() if n.node_id not in gone]
    mine = [p for t in topics for p in t.partitions if p.leader_node == me]
    moved = 0
    if mine and targets:
        others = [p.leader_node for t in topics for p in t.partitions if p.leader_node != me]
        placed = place(len(mine), targets, others)
        await meta.move_partitions([(p.stream_id, n) for p, n in zip(mine, placed, strict=True)])
        moved = len(mine)
        log.info("node %d handed %d partitions over to nodes %s", me, moved, sorted(set(placed)))
    await membership.stop()
    return moved
