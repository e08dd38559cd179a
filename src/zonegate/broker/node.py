"""One node: wires the metadata store, object store, WAL writer, leader and Kafka listener.

Start order: stores, leader, catalog, WAL writer, then the listener (so nothing
is accepted before it can be served). Stop order is the reverse: stop
accepting, answer what was read (WAL uploads and index commits finish), then
close the stores.
"""

from __future__ import annotations

import logging

from zonegate.broker.catalog import Catalog
from zonegate.broker.config import NodeConfig
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.metastore.api import MetaStore, open_metastore
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.server import KafkaServer, ListenerConfig
from zonegate.storage.log_cache import LogCache
from zonegate.storage.reader import StreamReader
from zonegate.wal_s3.object_store import open_object_store
from zonegate.wal_s3.wal_writer import WalWriter

log = logging.getLogger(__name__)


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.meta: MetaStore = open_metastore(config.meta_url)
        self.store = open_object_store(config.store_url, endpoint_url=config.s3_endpoint)
        self.log_cache = LogCache(config.log_cache_bytes)
        self.reader = StreamReader(self.store, self.log_cache)
        self.leader = LeaderService(self.meta)
        self.catalog = Catalog(self.meta, config.node_id)
        self.wal = WalWriter(
            self.store,
            node_id=config.node_id,
            seal_bytes=config.wal_seal_bytes,
            seal_age_s=config.seal_age_s,
            max_inflight_uploads=config.wal_max_inflight_uploads,
            on_uploaded=self.log_cache.put,
        )
        import zonegate.proxy.handlers  # noqa: F401  (handlers register themselves)

        self.server = KafkaServer(
            self,
            REGISTRY,
            ListenerConfig(config.host, config.port, config.max_request_bytes),
        )

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        await self.catalog.load()
        await self.server.start()
        log.info(
            "node %d (zone %s) serving Kafka on %s:%d; objects %s; metadata %s",
            self.config.node_id,
            self.config.zone,
            self.config.host,
            self.port,
            self.config.store_url,
            self.config.meta_url,
        )

    async def stop(self) -> None:
        await self.server.stop_accepting()
        await self.server.drain(self.config.drain_timeout_s)
        await self.wal.close(drain=True)
        await self.store.close()
        await self.meta.close()
        log.info("node %d stopped", self.config.node_id)
