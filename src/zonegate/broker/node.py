"""One node: wires stores, leader, membership, services, WAL writer and listeners, and runs them.

Every node plays every role: Kafka front for its zone's clients, leader of the
partitions placed on it, candidate controller. The handlers see only the
services (services/api.py); this module is the one place that knows how they
are made. Start order (the supervisor's): the catalog, the leader's RPC
listener, membership (so others can reach us), the Kafka listener, then the
background tasks; stop is the reverse: stop accepting, answer what was read
(WAL uploads and leader commits finish), hand the partitions and groups over
to the other live nodes at once (lifecycle.py), close the stores. Before any of
it, the node takes its data directory's lock and claims its node id under a new
incarnation, or refuses to start (node_identity.py). With `zonegate.workers` above
1 it starts its worker processes last (broker/workers.py) and drains them first; a
worker is a `Node` made with `worker` set, started by broker/worker.py (docs/cores.md).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping

import grpc

from zonegate.broker.config import NodeConfig
from zonegate.broker.controller import Controller, LeaderBalance
from zonegate.broker.group_lag import GroupLag
from zonegate.broker.http import HttpEndpoint
from zonegate.broker.kafka_servers import kafka_server
from zonegate.broker.lease_keeper import LeaseKeeper
from zonegate.broker.lifecycle import hand_over
from zonegate.broker.listeners import ListenerSpec
from zonegate.broker.metrics import node_registry
from zonegate.broker.node_identity import (
    DataDirLock,
    claim_node,
    fence_earlier_incarnations,
    new_incarnation,
)
from zonegate.broker.peer_probes import PeerProbes
from zonegate.broker.rpc_tls_settings import check_peers_accept, open_rpc_tls
from zonegate.broker.txn_wiring import make_transactions, start_transactions
from zonegate.broker.usage import UsageWriter
from zonegate.broker.workers import WorkerPool, loopback
from zonegate.coordinator.classic import GroupConfig
from zonegate.coordinator.consumer_group import ConsumerGroupSettings
from zonegate.coordinator.service import GroupCoordinator
from zonegate.leader_forwarder.directory import LeaderDirectory
from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.grpc_server import start_leader_server
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.moves import forget_moved
from zonegate.leader_forwarder.peers import LeaderPeers, dial_address
from zonegate.maintenance.compaction import CompactionSettings
from zonegate.maintenance.gc import GcSettings
from zonegate.maintenance.jobs import MaintenanceSettings, StorageMaintenance
from zonegate.maintenance.targets import LedPartitions
from zonegate.metastore.api import MetaStore, open_metastore
from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.proxy.server import KafkaServer
from zonegate.qos.admission import QosScheduler
from zonegate.qos.client_quotas import QuotaWindow
from zonegate.router.membership import Membership
from zonegate.router.placement import place_counted
from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.runtime.supervisor import Supervisor
from zonegate.services.api import Services
from zonegate.services.authorizer import AuthorizerService
from zonegate.services.catalog import Catalog
from zonegate.services.cluster import ClusterSettings, NodeCluster
from zonegate.services.groups import RoutedGroups
from zonegate.services.log_dirs import LogDirService
from zonegate.services.quotas import QuotaService
from zonegate.services.read_path import ReadService
from zonegate.services.reassignment import Reassignments
from zonegate.services.scram import ScramService
from zonegate.services.write_path import ProduceService
from zonegate.services.zone_probe import ZoneProbe
from zonegate.storage.block_cache import BlockCache
from zonegate.storage.log_cache import LogCache
from zonegate.storage.objects import ObjectNotFound
from zonegate.storage.reader import StreamReader
from zonegate.storage.store_url import open_object_store
from zonegate.usage.accounting import Accounting
from zonegate.wal_s3.wal_writer import WalWriter

log = logging.getLogger(__name__)
_PROBE_INTERVAL_S = 5.0
_LAG_INTERVAL_S = 10.0


class Node:
    def __init__(self, config: NodeConfig, clock: Clock = SYSTEM_CLOCK, *, worker: int = 0) -> None:
        """`worker` > 0: this is that worker process of the node (docs/cores.md,
        broker/worker.py): it serves the Kafka front and reaches the node's roles in
        the node process through `parent`."""
        self.config = config
        self.worker = worker
        self.parent: RemoteLeader | None = None  # a worker's link to the node process
        self.workers: WorkerPool | None = None  # the node process's, with zonegate.workers > 1
        self.clock = clock
        self.supervisor = Supervisor(f"node {config.node_id}", clock)
        self.meta: MetaStore = open_metastore(config.meta_url)
        self.store = open_object_store(
            config.store_url,
            endpoint_url=config.s3_endpoint,
            ca_bundle=str(config.s3_ca_bundle) if config.s3_ca_bundle else None,
            gc_orphan_grace_ms=config.gc_orphan_grace_ms,
            clock=clock,
        )
        # Every object-store call of the node waits for its grant (docs/qos.md).
        self.qos = QosScheduler(config.qos, clock)
        self.store.admission = self.qos
        self.log_cache = LogCache(config.log_cache_bytes)
        self.block_cache = BlockCache(config.block_cache_bytes)
        self.reader = StreamReader(self.store, self.log_cache, block_cache=self.block_cache)
        self.accounting = Accounting(config.node_id, config.zone)
        self.lock = DataDirLock(config.data_dir)
        self.incarnation = new_incarnation()
        # Set when another incarnation took this node's lease (we are a zombie): the
        # process stops (serve_cli.py waits on it).
        self.fenced = asyncio.Event()
        self.stopping_with: set[int] = set()  # nodes of this process stopping with it
        self._loop: asyncio.AbstractEventLoop | None = None
        me = NodeRecord(
            config.node_id,
            config.zone,
            config.advertised,
            config.port,
            config.rpc_reachable_host,
            config.rpc_port,
            incarnation=self.incarnation,
        )
        self.membership = Membership(
            self.meta, me, lease_ms=config.lease_ms, clock_ms=clock.wall_ms
        )
        # A worker reads the live nodes and never renews the node's lease.
        self.membership.leaving = worker > 0
        # The node id whose roles are served in this process: none in a worker.
        serves_roles = config.node_id if not worker else -1
        self.catalog = Catalog(
            self.meta,
            self._place,
            default_partitions=config.default_partitions,
            auto_create=config.auto_create_topics,
            on_deleted=lambda topic: self.maintenance.on_topic_deleted(topic),
            node_id=config.node_id,
        )
        self.led = LedPartitions(self.catalog, config.node_id)
        self.local_leader = LeaderService(self.meta, clock, self.led.segmenting, self._leads)
        self.catalog.listeners.append(
            forget_moved(self.local_leader, config.node_id, self.catalog.by_stream)
        )
        self.coordinator = GroupCoordinator(
            self.meta,
            GroupConfig(
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            ),
            self.catalog.get,
            clock,
            consumer_settings=ConsumerGroupSettings(
                heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                session_timeout_ms=config.group_consumer_session_timeout_ms,
            ),
            topic_names=lambda: [t.name for t in self.catalog.topics()],
            topic_by_id=self.catalog.by_id,
            group_configs=self.catalog.group_configs,
            lookup_topic=self.catalog.lookup,
        )
        self.controller = Controller(
            self.meta,
            self.membership,
            clock_ms=clock.wall_ms,
            balance=LeaderBalance(
                config.auto_leader_rebalance,
                config.leader_imbalance_check_interval_s * 1000,
                config.leader_imbalance_per_broker_percentage,
            ),
            dial=dict(config.rpc_dial_map),
        )
        # A node whose serving loop has not turned for five leases is stuck, not busy.
        self.leases = LeaseKeeper(
            lambda: open_metastore(config.meta_url),
            self.membership,
            self.controller,
            interval_s=config.heartbeat_s,
            stall_s=5 * config.lease_ms / 1000,
            monotonic=clock.monotonic,
            on_fenced=self._on_fenced_from_thread,
        )
        self.peers = LeaderPeers(
            config.node_id,
            config.zone,
            self.membership,
            self.accounting,
            dict(config.rpc_dial_map),
        )
        self.peers.tls = open_rpc_tls(  # StartupError for a wrong file
            config.rpc_ssl_keystore, config.rpc_ssl_truststore, config.rpc_ssl_server_name
        )
        self.leader = LeaderDirectory(
            serves_roles,
            self.local_leader,
            self.catalog.by_stream,
            self._peer,
            self.refresh_catalog,
            clock=clock,
        )
        self.wal = WalWriter(
            self.store,
            node_id=config.node_id,
            seal_bytes=config.wal_seal_bytes,
            seal_age_s=config.seal_age_s,
            max_inflight_uploads=config.wal_max_inflight_uploads,
            on_uploaded=self.log_cache.put,
            seal_when_idle=config.wal_seal_when_idle,
            clock=clock,
        )
        self.usage = UsageWriter(
            self.store,
            self.accounting,
            cluster=config.cluster_id,
            stored_bytes=self.local_leader.stored_bytes if not worker else lambda: 0,
            clock=clock,
        )
        self.cluster = NodeCluster(
            ClusterSettings(
                node_id=config.node_id,
                zone=config.zone,
                cluster_name=config.cluster_id,
                zone_routing=config.zone_routing,
                zone_cidrs=config.zone_cidrs,
                broker_configs=config.broker_configs,
            ),
            self.membership,
            ZoneProbe(
                functools.partial(dial_address, dial=dict(config.rpc_dial_map)),
                config.lease_ms / 1000,
            ),
        )
        self.groups = RoutedGroups(
            self.coordinator,
            serves_roles,
            self.cluster,
            self._peer,
            clock,
            owner_wait_s=config.lease_ms / 1000 + 2.0,
        )
        # Transactions (broker/txn_wiring.py): this node's share of the coordinator
        # shards, markers through its own WAL, calls passed to each shard's owner.
        self.transactions = make_transactions(
            config,
            clock,
            incarnation=self.incarnation,
            serves_roles=serves_roles,
            meta=self.meta,
            catalog=self.catalog,
            defaults=lambda: self.catalog.defaults,
            wal=self.wal,
            leader=self.leader,
            local_leader=self.local_leader,
            cluster=self.cluster,
            peer=self._peer,
            topic_partition=self.topic_partition,
        )
        self.txn_coordinator = self.transactions.coordinator
        self.txns = self.transactions.routed
        self.maintenance = StorageMaintenance(
            self.led,
            self.local_leader,
            self.store,
            self.meta,
            self.reader.read,
            lambda: self.controller.is_active,
            clock,
            MaintenanceSettings(
                retention_interval_s=config.retention_check_interval_ms / 1000,
                compaction_interval_s=config.compaction_interval_ms / 1000,
                gc_interval_s=config.gc_interval_ms / 1000,
                compaction=CompactionSettings(
                    stream_object_bytes=config.stream_object_bytes,
                    max_delay_ms=config.compaction_max_delay_ms,
                ),
                gc=GcSettings(
                    unreferenced_grace_ms=config.segment_delete_delay_ms,
                    orphan_grace_ms=config.gc_orphan_grace_ms,
                    usage_retention_ms=config.usage_retention_days * 86_400_000,
                ),
            ),
        )
        self.quotas = QuotaService(
            self.meta, clock, QuotaWindow(config.quota_window_num, config.quota_window_size_s)
        )
        self.scram = ScramService(self.meta)
        self.authorizer = AuthorizerService(
            self.meta,
            clock,
            enabled=config.authorizer_enabled,
            super_users=config.super_users,
            allow_if_no_acl=config.allow_everyone_if_no_acl_found,
        )
        self.produce = ProduceService(self.catalog, self.wal, self.leader, self.meta, clock)
        self.services = Services(
            cluster=self.cluster,
            topics=self.catalog,
            produce=self.produce,
            fetch=ReadService(
                self.catalog,
                self.leader,
                self.reader,
                self.meta,
                clock,
                tail_window_ms=config.qos_tail_window_ms,
            ),
            groups=self.groups,
            accounting=self.accounting,
            quotas=self.quotas,
            log_dirs=LogDirService(
                # The store's location without its query (an S3 endpoint's options).
                config.store_url.split("?", 1)[0],
                config.node_id,
                self.catalog.partitions,
                self.cluster.leader_for,
                # A worker holds no partition: the index in the store has the sizes.
                self.local_leader.partition_bytes if not worker else self._indexed_bytes,
                self.meta.read_index,
            ),
            leadership=Reassignments(
                self.meta, self.catalog, self.membership, clock_ms=clock.wall_ms
            ),
            scram=self.scram,
            authorizer=self.authorizer,
            transactions=self.txns,
            txn_admin=self.transactions.admin,
        )
        import zonegate.proxy.handlers  # noqa: F401  (handlers register themselves)

        # One server per Kafka listener; the first is `server` (metrics, tests).
        first, *others = config.kafka_listeners
        self.server = self._listener(first, None)
        self.servers = [self.server, *(self._listener(spec, self.server) for spec in others)]
        self.group_lag = GroupLag(
            self.meta,
            lambda gid: self.cluster.group_owner(gid) == config.node_id,
            self._partition_of,
            self._high_watermark,
        )
        self.http: HttpEndpoint | None = None
        self._rpc: grpc.aio.Server | None = None
        self.ready = False

    @property
    def port(self) -> int:
        return self.server.port

    def _listener(self, spec: ListenerSpec, first: KafkaServer | None) -> KafkaServer:
        return kafka_server(spec, self.config, self.services, self.scram, self.clock, first)

    def _endpoints(self) -> tuple[tuple[str, str, int], ...]:
        """Each listener's advertised endpoint (advertised.listeners, else the node's
        advertised host and the port bound)."""
        return tuple(
            (
                spec.name,
                spec.advertised_host or self.config.advertised_host or spec.host,
                spec.advertised_port or server.port,
            )
            for spec, server in zip(self.config.kafka_listeners, self.servers, strict=True)
        )

    # -- wiring -------------------------------------------------------------
    def _peer(self, node_id: int) -> RemoteLeader | None:
        """The link to a node's roles: in a worker, its own node's are the node process's."""
        if self.worker and node_id == self.config.node_id:
            return self.parent
        return self.peers.client(node_id)

    async def _indexed_bytes(self, stream_id: int) -> int:
        return sum(e.length for e in await self.meta.read_index(stream_id))

    def _place(self, count: int, current: Mapping[int, int]) -> list[int]:
        return place_counted(count, self.membership.leading_nodes(), current)

    def _leads(self, stream_id: int) -> int | None:
        """The epoch at which the catalog says this node leads the stream, else None."""
        p = self.catalog.by_stream(stream_id)
        return p.leader_epoch if p is not None and p.leader_node == self.config.node_id else None

    async def refresh_catalog(self) -> None:
        await self.membership.renew()
        await self.catalog.refresh()

    async def _refresh(self) -> None:
        await self.catalog.refresh()
        self.coordinator.forget(lambda gid: self.cluster.group_owner(gid) == self.config.node_id)

    def _on_fenced_from_thread(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._on_fenced)

    def _on_fenced(self) -> None:
        if not self.fenced.is_set():
            log.error(
                "node %d: another process now holds this node's lease; this one is no "
                "longer node %d and stops",
                self.config.node_id,
                self.config.node_id,
            )
            self.fenced.set()

    async def _claim(self) -> None:
        """Claims the node id (or StartupError), fences earlier incarnations' commits,
        and renews as membership did before."""
        now = self.clock.wall_ms()
        previous = self.lock.previous_incarnation()
        await claim_node(self.meta, self.membership.me, self.config.lease_ms, now, previous)
        self.lock.record_incarnation(self.incarnation)
        if await fence_earlier_incarnations(self.meta, self.config.node_id):
            await self.catalog.refresh()
        await self.membership.renew()

    async def _acquire_lock(self) -> None:
        self.lock.acquire()

    async def _release_lock(self) -> None:
        self.lock.release()

    def topic_partition(self, stream_id: int) -> tuple[str, int] | None:
        p = self.catalog.by_stream(stream_id)
        return None if p is None else (p.topic, p.partition)

    def _partition_of(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.catalog.get(topic)
        return t.partitions[partition] if t is not None and partition < len(t.partitions) else None

    async def _high_watermark(self, stream_id: int) -> int:
        return (await self.leader.offsets(stream_id))[1]

    async def _probe_object_store(self) -> None:
        """Fails (and so /readyz answers 503) while the object store cannot be read;
        the metadata store is probed by the catalog refresh, twice a heartbeat."""
        try:
            await self.store.get_range(self._probe_key, 0, 1)
        except ObjectNotFound:  # the store answers, without our object: write it again
            await self.store.put(self._probe_key, b"ok\n")

    def is_ready(self) -> bool:
        return self._is_ready()

    def _is_ready(self) -> bool:
        return self.ready and not self.supervisor.problems()

    # -- lifecycle ----------------------------------------------------------
    async def start(self) -> None:
        sup = self.supervisor
        self._loop = asyncio.get_running_loop()
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        await sup.start("data directory lock", self._acquire_lock, self._release_lock)
        await sup.start("metadata store", None, self.meta.close)
        await sup.start("object store", None, self.store.close)
        await sup.start("QoS scheduler", None, self.qos.close)
        await sup.start("catalog", self.catalog.load)
        await sup.start("client quotas", self.quotas.refresh)
        await sup.start("SCRAM credentials", self.scram.refresh)
        # Before any listener: no request is ever checked against an empty snapshot.
        await sup.start("ACLs", self.authorizer.refresh)
        self.peers.token = await self.meta.cluster_secret("rpc-token")
        self._rpc, rpc_port = await start_leader_server(
            self.local_leader,
            self.config.rpc_host or self.config.host,
            self.config.rpc_port,
            self.peers.served,
            self.groups.serve,
            token=self.peers.token,
            credentials=self.peers.tls.server_credentials() if self.peers.tls else None,
            txn_call=self.txns.serve,
        )
        rpc = self._rpc
        await sup.start("leader RPC", None, lambda: rpc.stop(grace=1.0))
        await sup.start("RPC clients", None, self.peers.close)
        await sup.start("usage records", None, self.usage.flush)
        for server in self.servers:
            await sup.start(f"Kafka listener {server.name}", server.start)
        endpoints = self._endpoints()
        self.membership.me = NodeRecord(
            self.config.node_id,
            self.config.zone,
            endpoints[0][1],
            endpoints[0][2],
            self.config.rpc_reachable_host,
            rpc_port,
            incarnation=self.incarnation,
            endpoints=endpoints,
        )
        if self.peers.tls is not None:
            # A node whose certificate the others refuse never joins (StartupError).
            await sup.start(
                "mutual TLS with the live nodes",
                lambda: check_peers_accept(
                    self.meta, self.peers, self.config.node_id, self.clock.wall_ms()
                ),
            )
        await sup.start("membership", self._claim, self.membership.stop)
        # Written with each renewal: what the controller judges a cut-off zone by.
        self.leases.probes = PeerProbes(
            self.membership,
            self.peers,
            self._loop,
            after_ms=self.config.lease_ms // 4,
            clock_ms=self.clock.wall_ms,
        )
        await sup.start("leases", self.leases.start, self.leases.stop)
        await sup.start("group coordinator", None, self.coordinator.shutdown)
        sup.run("group timers", self.coordinator.run_timers)
        await start_transactions(
            self.transactions, sup, self.config, self.local_leader.expire_producers
        )
        sup.every("usage records", self.config.usage_interval_s, self.usage.flush)
        sup.every("catalog refresh", self.config.heartbeat_s / 2, self._refresh)
        # Quotas another node changed apply here within a second or two.
        sup.every("client quotas", 2 * self.config.heartbeat_s, self.quotas.refresh)
        # So do SCRAM users another node added, changed or deleted.
        sup.every("SCRAM credentials", 2 * self.config.heartbeat_s, self.scram.refresh)
        # And ACLs, twice as often (a DENY must hold everywhere within 2 s): a cheap
        # version read, the ACLs themselves only when it moved.
        sup.every("ACLs", self.config.heartbeat_s, self.authorizer.refresh)
        self.maintenance.schedule(sup)
        # One small object per node, read back every few seconds: a GET costs a
        # fraction of a LIST, and proves reads work, not only that the host answers.
        self._probe_key = f"health/node-{self.config.node_id}"
        await self.store.put(self._probe_key, b"ok\n")
        sup.every("object store", _PROBE_INTERVAL_S, self._probe_object_store)
        sup.every("group lag", _LAG_INTERVAL_S, self.group_lag.measure)
        if self.config.workers > 1:
            rpc_host = self.config.rpc_host or self.config.host
            self.workers = WorkerPool(
                self.config,
                tuple(server.listening_fd() for server in self.servers),
                f"{loopback(rpc_host)}:{rpc_port}",
                logging.getLevelName(logging.getLogger().getEffectiveLevel()),
            )
            await sup.start("workers", self.workers.start, self.workers.stop)
        if self.config.http_port is not None:
            self.http = HttpEndpoint(
                node_registry(self),
                self._is_ready,
                self.config.host,
                self.config.http_port,
                self.workers.combine if self.workers is not None else None,
            )
            await sup.start("HTTP endpoint", self.http.start, self.http.stop)
        # Stopped first: stop accepting and answer what was read while this node still
        # leads its partitions and coordinates its groups.
        await sup.start("draining the Kafka listener", None, self._drain)
        self.ready = True
        log.info(
            "node %d (zone %s) serving Kafka on %s, leader RPC on port %d; objects %s; metadata %s",
            self.config.node_id,
            self.config.zone,
            ", ".join(
                f"{s.name}://{spec.host}:{s.port}"
                for spec, s in zip(self.config.kafka_listeners, self.servers, strict=True)
            ),
            rpc_port,
            self.config.store_url,
            self.config.meta_url,
        )

    async def _drain(self) -> None:
        """Stops accepting, answers what was read, and seals and uploads the open WAL."""
        for server in self.servers:
            await server.stop_accepting()
        # The workers drain beside this process, their batches committed by its leader.
        await asyncio.gather(
            self.server.drain(self.config.drain_timeout_s),  # all listeners' connections
            self.workers.stop() if self.workers is not None else asyncio.sleep(0),
        )
        await self.wal.close(drain=True)
        try:
            await hand_over(self.meta, self.membership, self.catalog.topics(), self.stopping_with)
        except Exception as exc:  # the store unreachable: the lease runs out instead
            log.warning("node %d could not hand over: %s", self.config.node_id, exc)

    async def stop(self) -> None:
        served, self.ready = self.ready, False
        await self.supervisor.stop()
        if served:  # a node refused at start says why in one line, and nothing more
            log.info("node %d stopped", self.config.node_id)
