"""What a client in a given zone is told: which brokers exist and who leads each partition.

With zone routing on, a client sees only the live nodes of its own zone, and
each partition's "leader" is a same-zone node chosen by rendezvous hashing, so
produce and fetch bytes never leave the zone; the receiving node forwards
batch summaries to the real leader. A zone with no live node falls back to the
real leaders, as does everything when routing is off (plain Kafka behaviour).

A zone whose nodes all stopped renewing their leases (silent for a quarter of a
lease: a lost zone before its leases end) counts as having no node: its clients
that reach another zone re-bootstrap there, and must be told of the other
zones' nodes, not of their own zone's dead ones, or they go back to those and
stay stuck until the leases end. Silent nodes are then left out of the answer,
and a partition they lead has no leader (-1: a retriable LEADER_NOT_AVAILABLE)
until the controller moves it, as Kafka names no leader its controller fenced.
"""

from __future__ import annotations

from collections.abc import Callable

from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.router.rendezvous import choose_node


class ClusterView:
    def __init__(
        self,
        live_nodes: Callable[[], list[NodeRecord]],
        *,
        zone_routing: bool = True,
        answering: Callable[[], list[NodeRecord]] | None = None,
    ) -> None:
        """`answering`: the live nodes not silent (Membership.answering_nodes); by
        default every live node."""
        self._live = live_nodes
        self._answering = answering or live_nodes
        self.zone_routing = zone_routing

    def _zone_nodes(self, zone: str) -> list[NodeRecord]:
        """The zone's live nodes, or none when none of them answers (module doc)."""
        if not self.zone_routing:
            return []
        nodes = [n for n in self._live() if n.zone == zone]
        if nodes and not any(n.zone == zone for n in self._answering()):
            return []
        return nodes

    def rewrites(self, zone: str) -> bool:
        """Whether a client of `zone` is told same-zone leaders rather than the real ones."""
        return bool(self._zone_nodes(zone))

    def brokers_for(self, zone: str) -> list[NodeRecord]:
        return self._zone_nodes(zone) or self._answering()

    def leader_for(self, p: PartitionInfo, zone: str) -> int:
        """The node id the client should send this partition's produce and fetch to."""
        return self.leaders(zone)(p)

    def leaders(self, zone: str) -> Callable[[PartitionInfo], int]:
        """`leader_for` of many partitions: the nodes read once, not per partition
        (a Metadata answer of 100,000 partitions asks 100,000 times)."""
        ids = [n.node_id for n in self._zone_nodes(zone)]
        if ids:
            return lambda p: choose_node(p.topic, p.partition, ids)
        answering = {n.node_id for n in self._answering()}
        return lambda p: p.leader_node if p.leader_node in answering else -1
