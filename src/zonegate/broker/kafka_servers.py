"""One Kafka listener of a node made into its server: TLS contexts, the listener's
authentication gate (SASL mechanisms, OAUTHBEARER's keys) and its limits, all from
the listener's spec (broker/listeners.py) and the node's settings."""

from __future__ import annotations

from zonegate.broker.config import NodeConfig
from zonegate.broker.listeners import ListenerSpec, listener_security
from zonegate.proxy.auth import JwksKeys
from zonegate.proxy.gate import ListenerGate
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.server import KafkaServer, ListenerConfig
from zonegate.proxy.tls import ServerContexts
from zonegate.runtime.clock import Clock
from zonegate.services.api import Services
from zonegate.services.scram import ScramService


def kafka_server(
    spec: ListenerSpec,
    config: NodeConfig,
    services: Services,
    scram: ScramService,
    clock: Clock,
    first: KafkaServer | None,
) -> KafkaServer:
    """`first`: the node's first listener's server, which the others share their
    connection limits and memory with (None for the first itself)."""
    contexts = ServerContexts(spec.tls, clock) if spec.tls is not None else None
    security = listener_security(spec)
    keys = JwksKeys(security.oauth, clock) if security.sasl and security.oauth is not None else None
    gate = ListenerGate(security, scram, keys, clock)
    return KafkaServer(
        services,
        REGISTRY,
        ListenerConfig(
            spec.host,
            spec.port,
            config.max_request_bytes,
            name=spec.name,
            queued_max_request_bytes=config.queued_max_request_bytes,
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            handshake_timeout_s=config.ssl_handshake_timeout_ms / 1000,
            receive_buffer_bytes=config.socket_receive_buffer_bytes,
            send_buffer_bytes=config.socket_send_buffer_bytes,
        ),
        contexts,
        gate,
        first,
    )
