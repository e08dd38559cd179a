"""Node membership by lease: each node renews its row; everyone reads the live set.

A node is live while its lease has not expired. A clean stop expires the lease
at once, so its partitions move without waiting out the lease. Renewals run on
the lease keeper's thread (lease_keeper.py), not on the serving loop. A
renewal refused (another incarnation of this node holds a live lease: this
process is a zombie) sets `fenced`; the node then stops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from zonegate.metastore.api import ClusterStore
from zonegate.metastore.models import NodeRecord
from zonegate.runtime.clock import SYSTEM_CLOCK

log = logging.getLogger(__name__)
wall_ms = SYSTEM_CLOCK.wall_ms


class Membership:
    def __init__(
        self,
        meta: ClusterStore,
        me: NodeRecord,
        *,
        lease_ms: int = 6000,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self._meta = meta
        self.me = me
        self.lease_ms = lease_ms
        self._clock = clock_ms
        # The nodes as last read, and the same records by id (node ids are the store's
        # key, so unique), replaced together as one tuple: the lease keeper's thread
        # writes it while the serving loop reads.
        self._view: tuple[list[NodeRecord], dict[int, NodeRecord]] = ([], {})
        self.leaving = False  # set when the node hands over: renewals stop
        # The peers this node has not reached lately, written with each renewal: set by
        # the lease keeper's probes (broker/peer_probes.py).
        self.unreached: tuple[int, ...] = ()
        self.fenced = False

    async def renew(self, meta: ClusterStore | None = None) -> bool:
        """Renews this node's lease and re-reads the others', through `meta` when given
        (the lease keeper's own connection, on its own thread). False if another
        incarnation of this node holds its lease (then `fenced` is set)."""
        meta = meta or self._meta
        renewed = True
        if not self.leaving:
            me = replace(self.me, unreached=self.unreached) if self.unreached else self.me
            renewed = await meta.register_node(me, self.lease_ms, self._clock())
            if not renewed:
                self.fenced = True
        nodes = await meta.list_nodes()
        self._view = (nodes, {n.node_id: n for n in nodes})
        return renewed

    async def stop(self) -> None:
        """Leaves: the lease expires at once, so this node's partitions move now. Only
        this incarnation's lease: a zombie leaving never ends its successor's."""
        self.leaving = True
        await self._meta.expire_node(self.me.node_id, self.me.incarnation)

    def nodes(self) -> list[NodeRecord]:
        """Every node as last read, live or not."""
        return self._view[0]

    def live_nodes(self) -> list[NodeRecord]:
        now = self._clock()
        return [n for n in self._view[0] if n.live(now) or n.node_id == self.me.node_id]

    def leading_nodes(self) -> list[NodeRecord]:
        """The live nodes partitions and groups may be led by: those the controller does
        not hold cut off from the other zones' nodes (router/reachability.py)."""
        return [n for n in self.live_nodes() if n.cut_off_ms == 0]

    def answering_nodes(self) -> list[NodeRecord]:
        """The live nodes less those silent for over a quarter of a lease (no renewal
        read since), which the controller probes as maybe dead (broker/controller.py):
        clients are not sent to them while their lease still runs (router/view.py).
        Silence is measured against the newest renewal read, not the clock, so a node
        that cannot read the metadata store does not find every other node silent."""
        live = self.live_nodes()
        newest = max((n.lease_expires_ms for n in live), default=0)
        quarter = self.lease_ms // 4
        me = self.me.node_id
        return [n for n in live if n.node_id == me or newest - n.lease_expires_ms <= quarter]

    def live_by_zone(self) -> dict[str, int]:
        """Per zone the metadata store knows a node of, how many of its nodes are live
        now: a lost zone's nodes keep their rows, so it is counted 0 here, where their
        own metrics are gone with them (docs/operations.md, ZonegateZoneWithoutNode)."""
        live = {n.node_id for n in self.live_nodes()}
        counts: dict[str, int] = {}
        for n in self._view[0]:
            counts[n.zone] = counts.get(n.zone, 0) + (n.node_id in live)
        return counts

    def zone_of(self, node_id: int) -> str:
        """The node's zone if `live_nodes()` lists it now, else "" (asked on every request)."""
        n = self._view[1].get(node_id)
        if n is None or not (n.live(self._clock()) or n.node_id == self.me.node_id):
            return ""
        return n.zone

    def node(self, node_id: int) -> NodeRecord | None:
        return self._view[1].get(node_id)
