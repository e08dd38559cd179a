"""The cluster as a client of a given zone sees it: brokers, controller, leaders, coordinators.

Zone routing (router/view.py) decides which live nodes a client is told of
and which of them "leads" each partition for it. Group ownership is
rendezvous hashing over all live nodes; a client is told of a node of its own
zone, which passes its group calls on to the owner (services/groups.py).
"""

from __future__ import annotations

import base64
import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.router.membership import Membership
from zonegate.router.rendezvous import choose_node
from zonegate.router.view import ClusterView
from zonegate.router.zones import ZoneResolver
from zonegate.services.zone_probe import ZoneProbe

# The name transaction shards are hashed under, as Kafka's shards are its partitions.
TXN_STATE = "__transaction_state"


def kafka_cluster_id(name: str) -> str:
    """Kafka cluster ids are 22-character base64 UUIDs; a stable one from the name."""
    raw = uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _advertised(n: NodeRecord) -> tuple[str, int]:
    return n.rpc_host, n.rpc_port


@dataclass(frozen=True)
class ClusterSettings:
    node_id: int
    zone: str
    cluster_name: str
    zone_routing: bool
    zone_cidrs: tuple[tuple[str, str], ...]
    broker_configs: Callable[[], dict[str, str]]


class NodeCluster:
    def __init__(
        self, settings: ClusterSettings, membership: Membership, probe: ZoneProbe | None = None
    ) -> None:
        self._settings = settings
        self._membership = membership
        # Other zones' nodes probed before their clients are answered (zone_probe.py).
        self._probe = probe or ZoneProbe(_advertised, membership.lease_ms / 1000)
        self._view = ClusterView(
            membership.live_nodes, zone_routing=settings.zone_routing, answering=self._answering
        )
        # Per listener: the live nodes that have it (a client is told of no other).
        self._views: dict[str, ClusterView] = {}
        resolver = ZoneResolver.from_map(settings.zone, dict(settings.zone_cidrs))
        # Every request asks; the answer depends only on (client id, address).
        self._zone_cache = functools.lru_cache(maxsize=4096)(resolver.resolve)
        self._cluster_id = kafka_cluster_id(settings.cluster_name)

    @property
    def node_id(self) -> int:
        return self._settings.node_id

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def zone_routing(self) -> bool:
        return self._view.zone_routing

    def client_zone(self, client_id: str | None, host: str) -> str:
        return self._zone_cache(client_id, host)

    def _answering(self) -> list[NodeRecord]:
        """Live nodes neither silent (Membership.answering_nodes) nor refusing a probe."""
        return [n for n in self._membership.answering_nodes() if not self._probe.refused(n)]

    async def check_zone(self, zone: str) -> None:
        """Before a client of another zone is answered: probes that zone's live nodes
        (zone_probe.py), so a zone whose every node refuses counts as having none."""
        if self._view.zone_routing and zone and zone != self._settings.zone:
            nodes = [n for n in self._membership.live_nodes() if n.zone == zone]
            if nodes:
                await self._probe.check(nodes)

    def _of(self, listener: str | None) -> ClusterView:
        """The view of clients of `listener`: as Kafka, a node without that listener is
        left out of what they are told. None: every live node."""
        if listener is None:
            return self._view
        view = self._views.get(listener)
        if view is None:
            members = self._membership

            def with_listener() -> list[NodeRecord]:
                return [n for n in members.live_nodes() if n.endpoint(listener) is not None]

            def answering() -> list[NodeRecord]:
                return [n for n in self._answering() if n.endpoint(listener) is not None]

            view = ClusterView(
                with_listener, zone_routing=self._view.zone_routing, answering=answering
            )
            self._views[listener] = view
        return view

    def brokers_for(self, zone: str, listener: str | None = None) -> list[NodeRecord]:
        return self._of(listener).brokers_for(zone)

    def controller_for(self, zone: str, listener: str | None = None) -> int:
        """This node if the client is told of it, else the first node it is told of.

        Admin clients send CreateTopics, DeleteTopics and CreatePartitions to the
        broker named as controller, and wait while none is (-1). Every zonegate node
        serves them (the metadata store is shared, as Kafka's brokers forward them
        since KIP-590), so naming a node of the client's zone keeps admin traffic in
        the zone, and an admin client of any zone works whichever node holds the
        controller lease (that lease only decides who moves partitions off dead nodes).
        """
        ids = [n.node_id for n in self.brokers_for(zone, listener)]
        me = self._settings.node_id
        return me if me in ids else ids[0] if ids else -1

    def leader_for(self, partition: PartitionInfo, zone: str, listener: str | None = None) -> int:
        return self._of(listener).leader_for(partition, zone)

    def leaders_for(self, zone: str, listener: str | None = None) -> Callable[[PartitionInfo], int]:
        return self._of(listener).leaders(zone)

    def rewrites(self, zone: str, listener: str | None = None) -> bool:
        return self._of(listener).rewrites(zone)

    def group_owner(self, group_id: str) -> int:
        """The node that coordinates `group_id`: rendezvous hashing over all live nodes
        but those held cut off from the other zones' (router/reachability.py)."""
        ids = [n.node_id for n in self._membership.leading_nodes()] or [self._settings.node_id]
        return choose_node(group_id, -1, ids)

    def coordinator_for(
        self, group_id: str, zone: str, listener: str | None = None
    ) -> NodeRecord | None:
        """A node of the client's zone (having the client's listener) when routing is on
        (it passes the calls on to the owner), else the owner itself."""
        view = self._of(listener)
        nodes = view.brokers_for(zone) if view.zone_routing else []
        if nodes:
            chosen = choose_node(group_id, -1, [n.node_id for n in nodes])
        else:
            chosen = self.group_owner(group_id)
        if chosen == self._settings.node_id:
            return self._membership.me
        return self._membership.node(chosen)

    def txn_shard_owner(self, shard: int) -> int:
        """The node that coordinates transaction shard `shard` (Kafka's leader of
        `__transaction_state` partition `shard`): rendezvous hashing over the same nodes
        as groups (docs/transactions.md)."""
        ids = [n.node_id for n in self._membership.leading_nodes()] or [self._settings.node_id]
        return choose_node(TXN_STATE, shard, ids)

    def txn_coordinator_for(
        self, shard: int, zone: str, listener: str | None = None
    ) -> NodeRecord | None:
        """FindCoordinator for a transactional id of `shard`: a node of the client's zone
        when routing is on (it passes the calls on to the owner), else the owner."""
        view = self._of(listener)
        nodes = view.brokers_for(zone) if view.zone_routing else []
        if nodes:
            chosen = choose_node(TXN_STATE, shard, [n.node_id for n in nodes])
        else:
            chosen = self.txn_shard_owner(shard)
        if chosen == self._settings.node_id:
            return self._membership.me
        return self._membership.node(chosen)

    def zone_of(self, node_id: int) -> str:
        return self._membership.zone_of(node_id)

    def zone_served(self, zone: str, listener: str | None = None) -> bool | None:
        # Asked only for requests whose client is of another zone than this node (the
        # usage records' cross-zone reason), so the scans stay off the common path.
        if any(n.zone == zone for n in self.brokers_for(zone, listener)):
            return True
        return False if any(n.zone == zone for n in self._membership.nodes()) else None

    def broker_configs(self) -> dict[str, str]:
        return self._settings.broker_configs()
