"""One frozen node configuration, loaded once from the command line.

A field that is a setting takes its default from the setting's row in
settings.py (`_d`); the others are fixed here."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from zonegate.broker.listeners import ListenerSpec
from zonegate.broker.settings import field_default as _d
from zonegate.qos.admission import QosSettings


@dataclass(frozen=True, slots=True)
class NodeConfig:
    data_dir: Path
    host: str = _d("host")
    port: int = _d("port")
    advertised_host: str | None = _d("advertised_host")
    # Every Kafka listener (security_settings.py); host and port are the first one's.
    # Empty: one PLAINTEXT listener on host:port.
    listeners: tuple[ListenerSpec, ...] = ()
    ssl_handshake_timeout_ms: int = _d("ssl_handshake_timeout_ms")
    node_id: int = _d("node_id")
    zone: str = _d("zone")
    cluster_id: str = _d("cluster_id")
    object_store_url: str | None = _d("object_store_url")  # None: file://<data_dir>/objects
    s3_endpoint: str | None = _d("s3_endpoint")
    metastore_url: str | None = _d("metastore_url")  # None: sqlite:///<data_dir>/meta.db
    wal_seal_bytes: int = _d("wal_seal_bytes")
    wal_seal_age_ms: float | None = _d("wal_seal_age_ms")  # None: 250 ms on S3, 2 ms locally
    wal_max_inflight_uploads: int = 4
    wal_seal_when_idle: bool = _d("wal_seal_when_idle")  # group commit
    log_cache_bytes: int = 256 * 1024 * 1024
    block_cache_bytes: int = _d("block_cache_bytes")  # stream objects' blocks
    max_request_bytes: int = _d("max_request_bytes")  # socket.request.max.bytes
    socket_receive_buffer_bytes: int = _d("socket_receive_buffer_bytes")  # -1: the OS's
    socket_send_buffer_bytes: int = _d("socket_send_buffer_bytes")  # -1: the OS's
    # Memory bounds of the Kafka listener (docs/qos.md).
    queued_max_request_bytes: int = _d("queued_max_request_bytes")  # -1: none
    max_connections: int = _d("max_connections")
    max_connections_per_ip: int = _d("max_connections_per_ip")
    auto_create_topics: bool = _d("auto_create_topics")
    default_partitions: int = _d("default_partitions")  # num.partitions
    rpc_host: str | None = _d("rpc_host")  # leader gRPC listener; None: the Kafka host
    rpc_port: int = _d("rpc_port")
    # Advertised leader RPC address -> the address dialled for it (a proxy between zones).
    rpc_dial_map: tuple[tuple[str, str], ...] = _d("rpc_dial_map")
    http_port: int | None = _d("http_port")  # /metrics, /healthz, /readyz; None: no endpoint
    lease_ms: int = _d("lease_ms")  # node and controller leases
    heartbeat_s: float = 0.5
    auto_leader_rebalance: bool = _d("auto_leader_rebalance")  # router/balance.py
    leader_imbalance_check_interval_s: int = _d("leader_imbalance_check_interval_s")
    leader_imbalance_per_broker_percentage: int = _d("leader_imbalance_per_broker_percentage")
    zone_routing: bool = _d("zone_routing")
    zone_cidrs: tuple[tuple[str, str], ...] = _d("zone_cidrs")  # (CIDR, zone)
    usage_interval_s: float = _d("usage_interval_s")
    # Storage lifecycle (docs/storage.md).
    retention_check_interval_ms: int = _d("retention_check_interval_ms")
    segment_delete_delay_ms: int = _d("segment_delete_delay_ms")
    gc_interval_ms: int = _d("gc_interval_ms")
    gc_orphan_grace_ms: int = _d("gc_orphan_grace_ms")
    usage_retention_days: int = _d("usage_retention_days")
    # Compaction of WAL ranges into stream objects (docs/storage.md, part 2).
    compaction_interval_ms: int = _d("compaction_interval_ms")
    stream_object_bytes: int = _d("stream_object_bytes")
    compaction_max_delay_ms: int = _d("compaction_max_delay_ms")
    drain_timeout_s: float = _d("drain_timeout_s")
    workers: int = _d("workers")  # processes serving the Kafka listeners (docs/cores.md)
    # Consumer groups, classic and KIP-848, with Kafka's broker settings and defaults.
    group_min_session_timeout_ms: int = _d("group_min_session_timeout_ms")
    group_max_session_timeout_ms: int = _d("group_max_session_timeout_ms")
    group_initial_rebalance_delay_ms: int = _d("group_initial_rebalance_delay_ms")
    group_consumer_heartbeat_interval_ms: int = _d("group_consumer_heartbeat_interval_ms")
    group_consumer_session_timeout_ms: int = _d("group_consumer_session_timeout_ms")
    # The transaction coordinator (txn_settings.py, docs/transactions.md).
    transaction_max_timeout_ms: int = _d("transaction_max_timeout_ms")
    transactional_id_expiration_ms: int = _d("transactional_id_expiration_ms")
    transaction_state_log_num_partitions: int = _d("transaction_state_log_num_partitions")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _d(
        "transaction_abort_timed_out_transaction_cleanup_interval_ms"
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _d(
        "transaction_remove_expired_transaction_cleanup_interval_ms"
    )
    producer_id_expiration_ms: int = _d("producer_id_expiration_ms")
    producer_id_expiration_check_interval_ms: int = _d("producer_id_expiration_check_interval_ms")
    transaction_partition_verification_enable: bool = _d(
        "transaction_partition_verification_enable"
    )
    # The object-store scheduler (docs/qos.md): its settings' defaults.
    qos: QosSettings = field(default_factory=QosSettings)
    qos_tail_window_ms: int = _d("qos_tail_window_ms")
    # Client quotas' rates (Kafka's quota.window.num, quota.window.size.seconds).
    quota_window_num: int = _d("quota_window_num")
    quota_window_size_s: int = _d("quota_window_size_s")
    # TLS to peers and stores (rpc_tls_settings.py, docs/internode-tls.md).
    rpc_ssl_keystore: Path | None = _d("rpc_ssl_keystore")
    rpc_ssl_truststore: Path | None = _d("rpc_ssl_truststore")
    rpc_ssl_server_name: str | None = _d("rpc_ssl_server_name")
    s3_ca_bundle: Path | None = _d("s3_ca_bundle")
    # Kafka settings set with no effect here (inter_broker.py), shown by DescribeConfigs.
    kafka_no_effect: tuple[tuple[str, str], ...] = ()
    # The authorizer and its ACLs (acl_settings.py, docs/acls.md).
    authorizer_enabled: bool = _d("authorizer_enabled")
    super_users: tuple[str, ...] = _d("super_users")
    allow_everyone_if_no_acl_found: bool = _d("allow_everyone_if_no_acl_found")

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

    @property
    def kafka_listeners(self) -> tuple[ListenerSpec, ...]:
        """The listeners, the first one on host:port."""
        first = ListenerSpec("PLAINTEXT", "PLAINTEXT", self.host, self.port)
        if not self.listeners:
            return (first,)
        head = self.listeners[0]
        return (replace(head, host=self.host, port=self.port), *self.listeners[1:])

    def shifted(self, offset: int) -> tuple[ListenerSpec, ...]:
        """The listeners of `zonegate serve`'s zone `offset`: each port (and each
        advertised port given) plus `offset`; port 0 stays any free port."""
        return tuple(
            replace(
                spec,
                port=spec.port + offset if spec.port else 0,
                advertised_port=(
                    spec.advertised_port + offset if spec.advertised_port else spec.advertised_port
                ),
            )
            for spec in self.kafka_listeners
        )

    @property
    def rpc_reachable_host(self) -> str:
        """The address other nodes dial for the leader RPC: a wildcard listener (0.0.0.0,
        as in a pod) is reached at the advertised host."""
        host = self.rpc_host or self.host
        return self.advertised if host in ("", "0.0.0.0", "::") else host

    def broker_configs(self) -> dict[str, str]:
        """The node's settings a DescribeConfigs of its broker resource shows."""
        return {
            "auto.create.topics.enable": str(self.auto_create_topics).lower(),
            "num.partitions": str(self.default_partitions),
            "socket.request.max.bytes": str(self.max_request_bytes),
            "socket.receive.buffer.bytes": str(self.socket_receive_buffer_bytes),
            "socket.send.buffer.bytes": str(self.socket_send_buffer_bytes),
            "broker.id": str(self.node_id),
            "node.id": str(self.node_id),
            "broker.rack": self.zone,
            "auto.leader.rebalance.enable": str(self.auto_leader_rebalance).lower(),
            "leader.imbalance.check.interval.seconds": str(self.leader_imbalance_check_interval_s),
            "leader.imbalance.per.broker.percentage": str(
                self.leader_imbalance_per_broker_percentage
            ),
            "zonegate.wal.seal.bytes": str(self.wal_seal_bytes),
            "zonegate.wal.seal.age.ms": str(self.seal_age_s * 1000),
            "group.consumer.session.timeout.ms": str(self.group_consumer_session_timeout_ms),
            "group.consumer.heartbeat.interval.ms": str(self.group_consumer_heartbeat_interval_ms),
            "log.segment.delete.delay.ms": str(self.segment_delete_delay_ms),
            # The leader's transaction settings AlterConfigs may change (the static
            # layer under the dynamic ones, services/leader_txn_settings.py).
            "producer.id.expiration.ms": str(self.producer_id_expiration_ms),
            "transaction.partition.verification.enable": str(
                self.transaction_partition_verification_enable
            ).lower(),
            **dict(self.kafka_no_effect),
        }
