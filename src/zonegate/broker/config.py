"""One frozen node configuration, loaded once from the command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from zonegate.qos.admission import QosSettings


@dataclass(frozen=True, slots=True)
class NodeConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    node_id: int = 1
    zone: str = "zone-a"
    cluster_id: str = "zonegate"
    object_store_url: str | None = None  # default: file://<data_dir>/objects
    s3_endpoint: str | None = None
    metastore_url: str | None = None  # default: sqlite:///<data_dir>/meta.db
    wal_seal_bytes: int = 8 * 1024 * 1024
    wal_seal_age_ms: float | None = None  # default: 250 ms on S3, 2 ms on a local directory
    wal_max_inflight_uploads: int = 4
    wal_seal_when_idle: bool = True  # group commit: seal at once when no upload is in flight
    log_cache_bytes: int = 256 * 1024 * 1024
    block_cache_bytes: int = 256 * 1024 * 1024  # stream objects' blocks (docs/storage.md)
    max_request_bytes: int = 104_857_600  # socket.request.max.bytes
    # Memory bounds of the Kafka listener (docs/qos.md).
    queued_max_request_bytes: int = 104_857_600  # queued.max.request.bytes; -1: none
    max_connections: int = 2_147_483_647  # max.connections
    max_connections_per_ip: int = 2_147_483_647  # max.connections.per.ip
    auto_create_topics: bool = True  # auto.create.topics.enable
    default_partitions: int = 1  # num.partitions
    rpc_host: str | None = None  # leader gRPC listener (default: the Kafka host)
    rpc_port: int = 0
    http_port: int | None = None  # /metrics, /healthz, /readyz; None: no endpoint
    lease_ms: int = 6000  # node and controller leases: a dead node's partitions move within it
    heartbeat_s: float = 0.5
    zone_routing: bool = True
    zone_cidrs: tuple[tuple[str, str], ...] = ()  # (CIDR, zone)
    usage_interval_s: float = 60.0
    # Storage lifecycle (docs/storage.md).
    retention_check_interval_ms: int = 30_000  # log.retention.check.interval.ms
    segment_delete_delay_ms: int = 60_000  # log.segment.delete.delay.ms
    gc_interval_ms: int = 60_000
    gc_orphan_grace_ms: int = 600_000
    usage_retention_days: int = 30
    # Compaction of WAL ranges into stream objects (docs/storage.md, part 2).
    compaction_interval_ms: int = 5_000
    stream_object_bytes: int = 16 * 1024 * 1024
    compaction_max_delay_ms: int = 540_000
    drain_timeout_s: float = 10.0
    # Classic consumer groups, Kafka's broker settings and defaults.
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    # KIP-848 consumer groups (group.protocol=consumer), Kafka's broker settings and defaults.
    group_consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    group_consumer_session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    # The object-store scheduler (docs/qos.md).
    qos: QosSettings = field(default_factory=QosSettings)
    qos_tail_window_ms: int = 60_000
    # Client quotas' rates (Kafka's quota.window.num, quota.window.size.seconds).
    quota_window_num: int = 11
    quota_window_size_s: int = 1

    @property
    def store_url(self) -> str:
        return self.object_store_url or (self.data_dir / "objects").resolve().as_uri()

    @property
    def meta_url(self) -> str:
        return self.metastore_url or f"sqlite:///{(self.data_dir / 'meta.db').resolve()}"

    @property
    def seal_age_s(self) -> float:
        if self.wal_seal_age_ms is not None:
            return self.wal_seal_age_ms / 1000.0
        return 0.25 if self.store_url.startswith("s3://") else 0.002

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host
