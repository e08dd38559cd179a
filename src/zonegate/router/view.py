"""What a client in a given zone is told: which brokers exist and who leads each partition.

With zone routing on, a client sees only the live nodes of its own zone, and
each partition's "leader" is a same-zone node chosen by rendezvous hashing, so
produce and fetch bytes never leave the zone; the receiving node forwards
batch summaries to the real leader. A zone with no live node falls back to the
real leaders, as does everything when routing is off (plain Kafka behaviour).
"""

from __future__ import annotations

from collections.abc import Callable

from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.router.rendezvous import choose_node


class ClusterView:
    def __init__(
        self, live_nodes: Callable[[], list[NodeRecord]], *, zone_routing: bool = True
    ) -> None:
        self._live = live_nodes
        self.zone_routing = zone_routing

    def _zone_nodes(self, zone: str) -> list[NodeRecord]:
        if not self.zone_routing:
            return []
        return [n for n in self._live() if n.zone == zone]

    def rewrites(self, zone: str) -> bool:
        """Whether a client of `zone` is told same-zone leaders rather than the real ones."""
        return bool(self._zone_nodes(zone))

    def brokers_for(self, zone: str) -> list[NodeRecord]:
        return self._zone_nodes(zone) or self._live()

    def leader_for(self, p: PartitionInfo, zone: str) -> int:
        """The node id the client should send this partition's produce and fetch to."""
        return self.leaders(zone)(p)

    def leaders(self, zone: str) -> Callable[[PartitionInfo], int]:
        """`leader_for` of many partitions: the live nodes read once, not per partition
        (a Metadata answer of 100,000 partitions asks 100,000 times)."""
        ids = [n.node_id for n in self._zone_nodes(zone)]
        if ids:
            return lambda p: choose_node(p.topic, p.partition, ids)
        live = {n.node_id for n in self._live()}
        return lambda p: p.leader_node if p.leader_node in live else -1
