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

A node that renews its lease but that the other zones' nodes cannot reach (a
zone cut off from the others while it still reaches the metadata and object
stores) is judged from the reachability every node writes in its row
(router/reachability.py): once found cut off for a quarter lease, the
controller holds it so in the store (`cut_off_ms`) and moves its partitions as
a dead node's, bumping their epochs, so its next commit of one is fenced; every
node then leaves it out of group ownership and placement (Membership.leading_nodes).
It is let go after a whole lease found reachable again, and the leader balance
brings its partitions back. Where the controller runs does not matter: it
judges from the rows, not from what it reaches itself (docs/operations.md).

Every `leader.imbalance.check.interval.seconds` the controller also checks the
leader balance (router/balance.py, Kafka's `auto.leader.rebalance.enable`):
partitions go back to their preferred nodes when live, and are reassigned from
nodes leading more than their share to nodes leading less, evenly per zone.
Each is the same move as a failover's (a leader epoch bump, no data copied);
Appends in flight to the old leader are fenced and retried by the producer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from zonegate.leader_forwarder.peers import dial_address
from zonegate.metastore.api import ClusterStore
from zonegate.metastore.models import MetaStoreUnavailable, NodeRecord, TopicInfo
from zonegate.router.balance import rebalance
from zonegate.router.membership import Membership
from zonegate.router.placement import place
from zonegate.router.reachability import CutOffs
from zonegate.runtime.clock import SYSTEM_CLOCK
from zonegate.services.zone_probe import refuses

log = logging.getLogger(__name__)
LEASE = "controller"


@dataclass(frozen=True, slots=True)
class LeaderBalance:
    """Kafka's auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds and
    leader.imbalance.per.broker.percentage (broker/settings.py)."""

    enabled: bool = True
    interval_ms: int = 10_000
    imbalance_pct: float = 10.0


class Controller:
    def __init__(
        self,
        meta: ClusterStore,
        membership: Membership,
        *,
        clock_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
        balance: LeaderBalance = LeaderBalance(),
        dial: Mapping[str, str] | None = None,
    ) -> None:
        self._meta = meta
        self._dial: Mapping[str, str] = dial or {}  # --rpc-dial-map
        self._members = membership
        self._clock_ms = clock_ms
        self._balance = balance
        self._next_balance_ms = 0
        self._started_ms = clock_ms()
        self._store_lost = False
        # A quarter lease found cut off before its partitions move; a whole lease found
        # reachable before it leads again (router/reachability.py).
        self._cut_offs = CutOffs(membership.lease_ms // 4, membership.lease_ms)
        self.is_active = False
        # The topics as of a metadata version: a pass reads them again only when the
        # version moved (a topic or a leader changed), not at every heartbeat, which at
        # 100,000 partitions would cost seconds of CPU a second.
        self._topics: tuple[int, list[TopicInfo]] | None = None
        # What the last balance check was decided on (the metadata version, the live
        # nodes and their zones): the same inputs give the same moves (balance.py is
        # pure), so a check over unchanged ones is skipped.
        self._balanced: tuple[int, tuple[tuple[int, str], ...]] | None = None

    async def run_once(self, meta: ClusterStore | None = None) -> int:
        """One pass, through `meta` when given (the lease keeper's own connection);
        returns how many partitions moved."""
        meta = meta or self._meta
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
        cut = await self._cut_off(meta, nodes, now)
        live = [n for n in nodes if n.live(now) and n.node_id not in gone | cut]
        if not live:
            return 0
        version, topics = await self._read_topics(meta)
        moved = await self._fail_over(meta, live, topics)
        if moved == 0 and self._balance.enabled and now >= self._next_balance_ms:
            self._next_balance_ms = now + self._balance.interval_ms
            inputs = (version, tuple(sorted((n.node_id, n.zone) for n in live)))
            if inputs != self._balanced:
                moved = await self._rebalance(meta, live, topics)
                # Moves bump the version, so the next check decides again.
                self._balanced = inputs
        return moved

    async def _read_topics(self, meta: ClusterStore) -> tuple[int, list[TopicInfo]]:
        """(the metadata version, the topics as of it or later), read from the store only
        when the version moved since the last read. The version is read first: a change
        landing between the two reads is read again at the next pass."""
        version = await meta.metadata_version()
        if self._topics is None or self._topics[0] != version:
            self._topics = (version, await meta.list_topics())
        return self._topics

    async def _fail_over(
        self, meta: ClusterStore, live: Sequence[NodeRecord], topics: Sequence[TopicInfo]
    ) -> int:
        """Moves the partitions of dead nodes to live ones; returns how many."""
        me = self._members.me.node_id
        live_ids = {n.node_id for n in live}
        leaders = [p.leader_node for t in topics for p in t.partitions]
        orphaned = [p for t in topics for p in t.partitions if p.leader_node not in live_ids]
        if not orphaned:
            return 0
        targets = place(len(orphaned), live, (x for x in leaders if x in live_ids))
        moves = [(p.stream_id, node) for p, node in zip(orphaned, targets, strict=True)]
        await meta.move_partitions(moves)
        log.info(
            "controller %d moved %d partitions off nodes dead or cut off %s",
            me,
            len(moves),
            sorted({p.leader_node for p in orphaned}),
        )
        return len(moves)

    async def _rebalance(
        self, meta: ClusterStore, live: Sequence[NodeRecord], topics: Sequence[TopicInfo]
    ) -> int:
        """One leader-balance check (module doc); returns how many partitions moved."""
        parts = [p for t in topics for p in t.partitions]
        moves = rebalance(parts, live, self._balance.imbalance_pct)
        back = [(m.stream_id, m.node) for m in moves if not m.reassign]
        spread = [(m.stream_id, m.node, m.node) for m in moves if m.reassign]
        if back:
            await meta.move_partitions(back)
        if spread:
            await meta.reassign_partitions(spread)
        if moves:
            log.info(
                "controller %d balanced leaders: %d partitions back to their preferred "
                "nodes, %d reassigned to nodes %s",
                self._members.me.node_id,
                len(back),
                len(spread),
                sorted({m.node for m in moves if m.reassign}),
            )
        return len(moves)

    async def _cut_off(self, meta: ClusterStore, nodes: Sequence[NodeRecord], now: int) -> set[int]:
        """The nodes held cut off from the other zones' nodes after this pass (module
        doc), holding or letting go in the store those the judgement names."""
        judged = self._cut_offs.judge(nodes, now)
        for node_id in sorted(judged.cut_off):
            await meta.set_cut_off(node_id, now)
            log.warning(
                "node %d renews its lease but has neither reached nor been reached by most "
                "of the other zones' nodes, %d ms on end: held cut off, its partitions move",
                node_id,
                self._cut_offs.hold_ms,
            )
        for node_id in sorted(judged.released):
            await meta.set_cut_off(node_id, 0)
            log.warning(
                "node %d reached the other zones' nodes again for %d ms: no longer cut off",
                node_id,
                self._cut_offs.release_ms,
            )
        held = {n.node_id for n in nodes if n.cut_off_ms > 0}
        return (held - judged.released) | judged.cut_off

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
        refused = await asyncio.gather(*(refuses(dial_address(n, self._dial)) for n in silent))
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
