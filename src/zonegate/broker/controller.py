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

A node whose process died (kill -9, OOM, a crash) leaves its lease running,
and waiting it out stalls its partitions for up to a lease. So each pass also
probes the nodes that stopped renewing (silent for a quarter of a lease), on
every node, not only the controller (the dead node may be the controller): a
connection to a node's leader RPC port that is *refused* means no process
listens there any more, and its lease is ended at once (fenced by its
incarnation, so a new start of the node is never touched). A node that is
only slow, paused, or out of reach accepts the connection or lets it time
out, and keeps its lease: then only its lease's end moves its partitions, as
before, and a paused process that wakes can commit nothing anyway (leader
epochs fence it). A controller lease whose holder's node lease has ended is
free, so a node that found the controller dead takes over in the same pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from zonegate.metastore.api import ClusterStore
from zonegate.metastore.models import MetaStoreUnavailable, NodeRecord
from zonegate.router.membership import Membership
from zonegate.router.placement import place
from zonegate.runtime.clock import SYSTEM_CLOCK

log = logging.getLogger(__name__)
LEASE = "controller"
_PROBE_TIMEOUT_S = 0.5


async def _refused(node: NodeRecord) -> bool:
    """Whether the node's leader RPC port refuses a connection: its process is gone."""
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(node.rpc_host, node.rpc_port), _PROBE_TIMEOUT_S
        )
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False  # out of reach, not known dead: its lease decides
    writer.close()
    return False


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
        self.is_active = await self._acquire(meta)
        if self._store_lost:
            # Back after the store was unreachable: every node's lease ran out meanwhile
            # and they renew within a heartbeat; moving now would take their partitions.
            self._store_lost = False
            self._started_ms = self._clock_ms()
        if not self.is_active:
            # The holder may be a node whose process is gone: ending its node lease
            # frees the controller lease too (ClusterStore.acquire_lease).
            if not await self._gone(meta, self._members.nodes(), self._clock_ms()):
                return 0
            self.is_active = await self._acquire(meta)
            if not self.is_active:
                return 0
        now = self._clock_ms()
        if now < self._started_ms + self._members.lease_ms:
            return 0  # nodes stopped with us may be starting again (module doc)
        nodes = await meta.list_nodes()
        gone = await self._gone(meta, nodes, now)
        live = [n for n in nodes if n.live(now) and n.node_id not in gone]
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

    async def _acquire(self, meta: ClusterStore) -> bool:
        try:
            return await meta.acquire_lease(
                LEASE, self._members.me.node_id, self._members.lease_ms, self._clock_ms()
            )
        except MetaStoreUnavailable:
            self._store_lost = True
            raise

    async def _gone(self, meta: ClusterStore, nodes: Sequence[NodeRecord], now: int) -> set[int]:
        """Nodes whose lease runs but whose process is gone (module doc); their leases
        are ended."""
        me = self._members.me.node_id
        lease = self._members.lease_ms
        silent = [
            n
            for n in nodes
            if n.node_id != me
            and n.live(now)
            and now - (n.lease_expires_ms - lease) > lease // 4
            and n.rpc_port > 0
        ]
        if not silent:
            return set()
        refused = await asyncio.gather(*(_refused(n) for n in silent))
        gone = {n for n, r in zip(silent, refused, strict=True) if r}
        for n in gone:
            await meta.expire_node(n.node_id, n.incarnation)
            log.warning(
                "node %d stopped renewing its lease and its leader RPC port %s:%d refuses "
                "connections: its process is gone; its lease ended now",
                n.node_id,
                n.rpc_host,
                n.rpc_port,
            )
        return {n.node_id for n in gone}
