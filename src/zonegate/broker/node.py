"""One node: wires the stores, leader, cluster membership, WAL writer and listeners.

Every node plays every role: Kafka front for its zone's clients, leader of the
partitions placed on it, candidate controller. Start order: stores and
catalog, the leader's RPC listener, membership (so others can reach us), the
Kafka listener, then the background loops. Stop order is the reverse: stop
accepting, answer what was read (WAL uploads and leader commits finish),
leave the membership (so partitions move at once), close the stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

import grpc

from zonegate.broker.config import NodeConfig
from zonegate.broker.controller import Controller
from zonegate.broker.http import HttpEndpoint
from zonegate.broker.lease_keeper import LeaseKeeper
from zonegate.broker.metrics import node_registry
from zonegate.broker.usage import UsageWriter
from zonegate.coordinator.classic import GroupConfig
from zonegate.coordinator.service import GroupCoordinator
from zonegate.leader_forwarder.api import Leader
from zonegate.leader_forwarder.directory import LeaderDirectory
from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.grpc_server import start_leader_server
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.metastore.api import MetaStore, open_metastore
from zonegate.metastore.models import NodeRecord, PartitionInfo
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.server import KafkaServer, ListenerConfig
from zonegate.router.membership import Membership
from zonegate.router.placement import place
from zonegate.router.rendezvous import choose_node
from zonegate.router.view import ClusterView
from zonegate.router.zones import ZoneResolver
from zonegate.services.catalog import Catalog
from zonegate.storage.log_cache import LogCache
from zonegate.storage.objects import open_object_store
from zonegate.storage.reader import StreamReader
from zonegate.usage.accounting import FORWARD_RPC, Accounting
from zonegate.wal_s3.wal_writer import WalWriter

log = logging.getLogger(__name__)


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.meta: MetaStore = open_metastore(config.meta_url)
        self.store = open_object_store(config.store_url, endpoint_url=config.s3_endpoint)
        self.log_cache = LogCache(config.log_cache_bytes)
        self.reader = StreamReader(self.store, self.log_cache)
        self.accounting = Accounting(config.node_id, config.zone)
        self.local_leader = LeaderService(self.meta)
        self.catalog = Catalog(self.meta, self._place)
        self.catalog.listeners.append(self._on_catalog_change)
        me = NodeRecord(
            config.node_id,
            config.zone,
            config.advertised,
            config.port,
            config.rpc_host or config.host,
            config.rpc_port,
        )
        self.membership = Membership(self.meta, me, lease_ms=config.lease_ms)
        self.coordinator = GroupCoordinator(
            self.meta,
            GroupConfig(
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            ),
            self.catalog.get,
        )
        self.controller = Controller(self.meta, self.membership)
        # A node whose serving loop has not turned for five leases is stuck, not busy.
        self.leases = LeaseKeeper(
            lambda: open_metastore(config.meta_url),
            self.membership,
            self.controller,
            interval_s=config.heartbeat_s,
            stall_s=5 * config.lease_ms / 1000,
        )
        self.view = ClusterView(self.membership.live_nodes, zone_routing=config.zone_routing)
        self.zones = ZoneResolver.from_map(config.zone, dict(config.zone_cidrs))
        # Every request asks; the answer depends only on (client id, address).
        self.client_zone = functools.lru_cache(maxsize=4096)(self.zones.resolve)
        self._remotes: dict[int, RemoteLeader] = {}
        self._rpc_token = ""  # read from the metadata store at start
        self.leader = LeaderDirectory(
            config.node_id,
            self.local_leader,
            self.catalog.by_stream,
            self._remote,
            self.refresh_catalog,
        )
        self.wal = WalWriter(
            self.store,
            node_id=config.node_id,
            seal_bytes=config.wal_seal_bytes,
            seal_age_s=config.seal_age_s,
            max_inflight_uploads=config.wal_max_inflight_uploads,
            on_uploaded=self.log_cache.put,
            seal_when_idle=config.wal_seal_when_idle,
        )
        self.usage = UsageWriter(
            self.store,
            self.accounting,
            cluster=config.cluster_id,
            interval_s=config.usage_interval_s,
            stored_bytes=self._stored_bytes,
        )
        import zonegate.proxy.handlers  # noqa: F401  (handlers register themselves)

        self.server = KafkaServer(
            self, REGISTRY, ListenerConfig(config.host, config.port, config.max_request_bytes)
        )
        self.http: HttpEndpoint | None = None
        self._rpc: grpc.aio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.ready = False

    @property
    def port(self) -> int:
        return self.server.port

    # -- wiring -------------------------------------------------------------
    def _place(self, count: int, current: list[int]) -> list[int]:
        return place(count, self.membership.live_nodes(), current)

    def _remote(self, node_id: int) -> Leader | None:
        rec = self.membership.node(node_id)
        remote = self._remotes.get(node_id)
        if remote is not None and rec is not None:
            if remote.target != f"{rec.rpc_host}:{rec.rpc_port}":
                # The node came back (same id, new RPC port): drop the channel to the old one.
                stale = self._remotes.pop(node_id)
                asyncio.get_running_loop().create_task(stale.close())
                remote = None
        if remote is None:
            if rec is None:
                return None
            peer_zone = rec.zone

            def count(bytes_out: int, bytes_in: int) -> None:
                self.accounting.add(
                    FORWARD_RPC,
                    peer_zone=peer_zone,
                    leader_zone=peer_zone,
                    bytes_in=bytes_in,
                    bytes_out=bytes_out,
                    requests=1,
                )

            remote = RemoteLeader(
                f"{rec.rpc_host}:{rec.rpc_port}",
                from_node=self.config.node_id,
                token=self._rpc_token,
                bytes_hook=count,
            )
            self._remotes[node_id] = remote
        return remote

    # -- group coordination ---------------------------------------------------
    def group_owner(self, group_id: str) -> int:
        """The node that coordinates `group_id`: rendezvous hashing over all live nodes."""
        ids = [n.node_id for n in self.membership.live_nodes()] or [self.config.node_id]
        return choose_node(group_id, -1, ids)

    def _owns_group(self, group_id: str) -> bool:
        return self.group_owner(group_id) == self.config.node_id

    def coordinator_peer(self, node_id: int) -> RemoteLeader | None:
        remote = self._remote(node_id)
        return remote if isinstance(remote, RemoteLeader) else None

    async def _serve_forwarded(
        self, api_key: int, api_version: int, body: bytes, client_id: str, client_host: str
    ) -> bytes:
        from zonegate.proxy.forward import serve_forwarded

        return await serve_forwarded(self, api_key, api_version, body, client_id, client_host)

    def group_coordinator_for(self, group_id: str, zone: str) -> NodeRecord | None:
        """What FindCoordinator tells a client of `zone`: a node of its own zone when routing
        is on (it forwards to the owner), else the owner itself."""
        nodes = self.view.brokers_for(zone) if self.view.zone_routing else []
        if nodes:
            chosen = choose_node(group_id, -1, [n.node_id for n in nodes])
        else:
            chosen = self.group_owner(group_id)
        if chosen == self.config.node_id:
            return self.membership.me
        return self.membership.node(chosen)

    def _on_rpc_served(self, from_node: int, bytes_in: int, bytes_out: int) -> None:
        zone = self.membership.zone_of(from_node) if from_node >= 0 else ""
        self.accounting.add(
            FORWARD_RPC,
            peer_zone=zone,
            leader_zone=self.config.zone,
            bytes_in=bytes_in,
            bytes_out=bytes_out,
            requests=1,
        )

    def _on_catalog_change(self, old: dict[int, PartitionInfo]) -> None:
        me = self.config.node_id
        stale = []
        for sid, before in old.items():
            now = self.catalog.by_stream(sid)
            if (
                now is None
                or (before.leader_node == me and now.leader_node != me)
                or (now.leader_epoch != before.leader_epoch)
            ):
                stale.append(sid)
        self.local_leader.forget(stale)

    def _stored_bytes(self) -> int:
        return self.local_leader.stored_bytes()

    async def refresh_catalog(self) -> None:
        await self.membership.renew()
        await self.catalog.refresh()

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_s / 2)
            try:
                await self.catalog.refresh()
            except Exception:
                log.exception("catalog refresh failed")
            self.coordinator.forget(self._owns_group)

    # -- lifecycle ----------------------------------------------------------
    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        await self.catalog.load()
        self._rpc_token = await self.meta.cluster_secret("rpc-token")
        self._rpc, rpc_port = await start_leader_server(
            self.local_leader,
            self.config.rpc_host or self.config.host,
            self.config.rpc_port,
            self._on_rpc_served,
            self._serve_forwarded,
            token=self._rpc_token,
        )
        await self.server.start()
        self.membership.me = NodeRecord(
            self.config.node_id,
            self.config.zone,
            self.config.advertised,
            self.port,
            self.config.rpc_host or self.config.host,
            rpc_port,
        )
        await self.membership.renew()
        await self.leases.start()
        await self.coordinator.start()
        await self.usage.start()
        if self.config.http_port is not None:
            self.http = HttpEndpoint(
                node_registry(self), lambda: self.ready, self.config.host, self.config.http_port
            )
            await self.http.start()
        self._tasks.append(asyncio.get_running_loop().create_task(self._refresh_loop()))
        self.ready = True
        log.info(
            "node %d (zone %s) serving Kafka on %s:%d, leader RPC on port %d; objects %s; "
            "metadata %s",
            self.config.node_id,
            self.config.zone,
            self.config.host,
            self.port,
            rpc_port,
            self.config.store_url,
            self.config.meta_url,
        )

    async def stop(self) -> None:
        self.ready = False
        await self.server.stop_accepting()
        await self.server.drain(self.config.drain_timeout_s)
        await self.wal.close(drain=True)
        for t in self._tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await self.coordinator.stop()
        await self.leases.stop()
        await self.membership.stop()
        await self.usage.stop()
        if self.http is not None:
            await self.http.stop()
        if self._rpc is not None:
            await self._rpc.stop(grace=1.0)
        for remote in self._remotes.values():
            await remote.close()
        await self.store.close()
        await self.meta.close()
        log.info("node %d stopped", self.config.node_id)
