"""The controller: one node at a time (a lease), moving partitions off dead nodes.

Every heartbeat each node tries to take or renew the controller lease (from its
lease keeper's thread, lease_keeper.py); the holder looks for partitions whose
leader's lease has expired and moves them to live nodes, balanced across zones
and nodes, bumping each leader epoch in the same transaction. Moving a
partition copies no data: the new leader loads the index from the metadata
store.

A controller moves nothing during its first lease after its process started:
nodes that stopped together (a restart of `zonegate serve`, or of a whole
cluster) come back within it and find their partitions where they left them,
instead of the first one up taking every partition of the others. The same
holds after the metadata store was unreachable for longer than a lease: no
node could renew meanwhile, and all of them do within a heartbeat of its return.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from zonegate.metastore.api import ClusterStore
from zonegate.metastore.models import MetaStoreUnavailable
from zonegate.router.membership import Membership
from zonegate.router.placement import place
from zonegate.runtime.clock import SYSTEM_CLOCK

log = logging.getLogger(__name__)
LEASE = "controller"


class Controller:
    def __init__(
        self,
        meta: ClusterStore,
        membership: Membership,
        *,
        clock_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
    ) -> None:
        self._meta = meta
        self._members = membership
        self._clock_ms = clock_ms
        self._started_ms = clock_ms()
        self._store_lost = False
        self.is_active = False

    async def run_once(self, meta: ClusterStore | None = None) -> int:
        """One pass, through `meta` when given (the lease keeper's own connection);
        returns how many partitions moved."""
        meta = meta or self._meta
        me = self._members.me.node_id
        try:
            self.is_active = await meta.acquire_lease(
                LEASE, me, self._members.lease_ms, self._clock_ms()
            )
        except MetaStoreUnavailable:
            self._store_lost = True
            raise
        if self._store_lost:
            # Back after the store was unreachable: every node's lease ran out meanwhile
            # and they renew within a heartbeat; moving now would take their partitions.
            self._store_lost = False
            self._started_ms = self._clock_ms()
        if not self.is_active:
            return 0
        now = self._clock_ms()
        if now < self._started_ms + self._members.lease_ms:
            return 0  # nodes stopped with us may be starting again (module doc)
        nodes = await meta.list_nodes()
        live = [n for n in nodes if n.live(now)]
        if not live:
            return 0
        live_ids = {n.node_id for n in live}
        topics = await meta.list_topics()
        leaders = [p.leader_node for t in topics for p in t.partitions]
        orphaned = [p for t in topics for p in t.partitions if p.leader_node not in live_ids]
        if not orphaned:
            return 0
        targets = place(len(orphaned), live, (x for x in leaders if x in live_ids))
        moves = [(p.stream_id, node) for p, node in zip(orphaned, targets, strict=True)]
        await meta.move_partitions(moves)
        log.info(
            "controller %d moved %d partitions off dead nodes %s",
            me,
            len(moves),
            sorted({p.leader_node for p in orphaned}),
        )
        return len(moves)
