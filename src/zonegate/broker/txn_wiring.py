"""A node's transaction pieces (docs/transactions.md), made and started in one place.

Every node holds its share of the coordinator shards (`txn_coordinator/role.py`,
rebalanced as the live nodes change), writes markers through its own WAL and
leaders (`services/txn_markers.py`), passes each transaction call to its shard's
owner (`services/txn_routing.py`; a worker process holds no shard and passes its own
node's calls to the node process, as it does group calls), and has its leader
verify a transaction's first batch at a partition (KIP-890) and forget idle
producer ids, with the settings AlterConfigs may change read at each use.
broker/node.py makes a `NodeTransactions` and starts it after the group coordinator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from zonegate.broker.config import NodeConfig
from zonegate.leader_forwarder.directory import LeaderDirectory
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.metastore.api import MetaStore
from zonegate.runtime.clock import Clock
from zonegate.runtime.supervisor import Supervisor
from zonegate.services.catalog import Catalog
from zonegate.services.cluster import NodeCluster
from zonegate.services.leader_txn_settings import LeaderTxnSettings
from zonegate.services.txn_admin import TxnAdminService
from zonegate.services.txn_markers import WalMarkerWriter
from zonegate.services.txn_routing import RoutedTxns, TxnPeer
from zonegate.transactions.coordinator_core import CoordinatorConfig
from zonegate.txn_coordinator.role import TxnCoordinator, TxnCoordinatorConfig
from zonegate.wal_s3.wal_writer import WalWriter


@dataclass
class NodeTransactions:
    markers: WalMarkerWriter
    coordinator: TxnCoordinator
    routed: RoutedTxns
    leader_settings: LeaderTxnSettings
    admin: TxnAdminService
    shards_due: asyncio.Event = field(default_factory=asyncio.Event)


def make_transactions(
    config: NodeConfig,
    clock: Clock,
    *,
    incarnation: int,
    serves_roles: int,
    meta: MetaStore,
    catalog: Catalog,
    defaults: Callable[[], Mapping[str, str]],
    wal: WalWriter,
    leader: LeaderDirectory,
    local_leader: LeaderService,
    cluster: NodeCluster,
    peer: Callable[[int], TxnPeer | None],
    topic_partition: Callable[[int], tuple[str, int] | None],
) -> NodeTransactions:
    """`serves_roles`: the node id whose roles run in this process (-1 in a worker)."""
    markers = WalMarkerWriter(catalog, wal, leader, clock)
    coordinator = TxnCoordinator(
        config.node_id,
        incarnation,
        meta,
        markers,
        cluster.txn_shard_owner,
        clock,
        TxnCoordinatorConfig(
            shards=config.transaction_state_log_num_partitions,
            core=CoordinatorConfig(
                max_timeout_ms=config.transaction_max_timeout_ms,
                id_expiration_ms=config.transactional_id_expiration_ms,
            ),
            abort_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            expire_interval_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
        ),
    )
    routed = RoutedTxns(
        coordinator,
        serves_roles,
        cluster,
        peer,
        clock,
        owner_wait_s=config.lease_ms / 1000 + 2.0,
    )
    # The leader's settings AlterConfigs may change: read at each use from the catalog's
    # dynamic broker configs over the command line.
    settings = LeaderTxnSettings(
        defaults,
        producer_id_expiration_ms=config.producer_id_expiration_ms,
        verification=config.transaction_partition_verification_enable,
    )
    # KIP-890: a transaction's first batch at a led partition is verified with them.
    local_leader.use_transactions(
        routed,
        topic_partition,
        catalog.refresh,
        verification=settings.verification_enabled,
    )
    admin = TxnAdminService(
        routed, cluster, config.transaction_state_log_num_partitions, catalog, leader, markers
    )
    return NodeTransactions(markers, coordinator, routed, settings, admin)


async def start_transactions(
    txn: NodeTransactions,
    sup: Supervisor,
    config: NodeConfig,
    expire_producers: Callable[[int], Awaitable[None]],
) -> None:
    """Starts the role (after the group coordinator) and its periodic passes."""
    await sup.start(
        "transaction coordinator",
        lambda: txn.coordinator.start(take_shards=False),
        txn.coordinator.stop,
    )
    # The shards this node should own, taken over (or let go) as the live nodes change;
    # the first pass at once, in the background.
    txn.shards_due.set()
    sup.every(
        "transaction shards",
        config.heartbeat_s / 2,
        txn.coordinator.rebalance,
        wake=txn.shards_due,
    )
    # producer.id.expiration.ms (as in force at each sweep) at the partitions led here.
    sup.every(
        "producer id expiry",
        config.producer_id_expiration_check_interval_ms / 1000,
        lambda: expire_producers(txn.leader_settings.producer_id_expiration_ms()),
    )
