"""The Kafka listener: one server per listener, accepting connections (each a
`KafkaConnection`, proxy/connection.py), bounding them (max.connections and
max.connections.per.ip), and draining them at shutdown. On TLS listeners it holds the
current certificate's context (proxy/tls.py), on all the listener's authentication
gate (proxy/gate.py).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zonegate.proxy.connection import KafkaConnection
from zonegate.proxy.faults import FaultInjector, FrameCapture
from zonegate.proxy.gate import ListenerGate
from zonegate.proxy.memory import RequestMemory
from zonegate.proxy.metrics import RequestMetrics
from zonegate.proxy.registry import HandlerRegistry
from zonegate.proxy.tls import ServerContexts
from zonegate.proxy.tls_connection import TlsKafkaConnection

if TYPE_CHECKING:
    from zonegate.services.api import Services

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    host: str
    port: int
    max_request_bytes: int = 104_857_600  # socket.request.max.bytes
    max_inflight_per_connection: int = 64
    name: str = "PLAINTEXT"  # the listener's name, as Kafka names listeners
    queued_max_request_bytes: int = -1  # queued.max.request.bytes; -1: no bound
    max_connections: int = 2_147_483_647  # max.connections
    max_connections_per_ip: int = 2_147_483_647  # max.connections.per.ip
    handshake_timeout_s: float = 10.0  # a TLS handshake not done by then is closed
    receive_buffer_bytes: int = -1  # socket.receive.buffer.bytes; -1: the OS's autotuning
    send_buffer_bytes: int = -1  # socket.send.buffer.bytes

    def size_buffers(self, sock: socket.socket) -> None:
        """Sets a socket's buffers as Kafka's acceptor does (on its listening socket, which
        accepted sockets inherit, and on each accepted one). A bounded receive buffer
        keeps a fast client's writes in its own socket longer: measured against Apache
        Kafka 4.3.1 with its default and with -1, librdkafka spent 6.7-8.1 against
        9.2-14.0 CPU s/GiB sending over SASL_SSL (docs/benchmarks.md)."""
        if self.receive_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        if self.send_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)


class KafkaServer:
    def __init__(
        self,
        services: Services,
        registry: HandlerRegistry,
        config: ListenerConfig,
        contexts: ServerContexts | None = None,
        gate: ListenerGate | None = None,
        node_wide: KafkaServer | None = None,
    ) -> None:
        self._services = services
        self.contexts = contexts  # TLS listeners: the current certificate's context
        self.gate = gate  # the listener's authentication (None: all anonymous)
        self._registry = registry
        self._config = config
        self._server: asyncio.Server | None = None
        # A node's listeners share their connections (max.connections counts them all),
        # request memory (queued.max.request.bytes is the node's), metrics and test
        # hooks: those of `node_wide`, its first listener's server.
        self._root: KafkaServer = node_wide or self
        self.connections: set[KafkaConnection] = set()
        self.faults = FaultInjector()
        self.capture = FrameCapture()
        self.bytes_in = 0
        self.bytes_out = 0
        self.metrics = RequestMetrics()
        self.memory = RequestMemory(config.queued_max_request_bytes)
        if node_wide is not None:
            self.connections, self.faults, self.capture = (
                node_wide.connections,
                node_wide.faults,
                node_wide.capture,
            )
            self.metrics, self.memory = node_wide.metrics, node_wide.memory
        self.connections_refused = 0

    def count_refused(self) -> None:
        self._root.connections_refused += 1

    def over_connection_limits(self, host: str) -> str | None:
        """Why a new connection from `host` is one too many, or None."""
        c = self._config
        if len(self.connections) >= c.max_connections:
            return f"max.connections ({c.max_connections}) reached"
        if c.max_connections_per_ip < 2_147_483_647:
            same = sum(1 for conn in self.connections if conn.client.host == host)
            if same >= c.max_connections_per_ip:
                return f"max.connections.per.ip ({c.max_connections_per_ip}) reached for {host}"
        return None

    def metrics_request_bytes(self, n: int) -> None:
        self.bytes_in += n

    def metrics_response_bytes(self, n: int) -> None:
        self.bytes_out += n

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def port(self) -> int:
        assert self._server is not None
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def start(self, sock: socket.socket | None = None) -> None:
        """Binds the listener, or accepts on `sock`: a listening socket another process
        of the node bound and shares (docs/cores.md)."""
        loop = asyncio.get_running_loop()
        # TLS listeners read into a buffer of their own (proxy/connection.py).
        connection = KafkaConnection if self.contexts is None else TlsKafkaConnection

        def factory() -> KafkaConnection:
            return connection(self._services, self._registry, self._config, self)

        if sock is not None:
            self._server = await loop.create_server(factory, sock=sock, backlog=1024)
            return
        self._server = await loop.create_server(
            factory, self._config.host, self._config.port, reuse_address=True, backlog=1024
        )
        for listening in self._server.sockets:
            self._config.size_buffers(listening)

    def listening_fd(self) -> int:
        """The listening socket's file descriptor, to share with the node's workers."""
        assert self._server is not None
        return int(self._server.sockets[0].fileno())

    async def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def drain(self, timeout_s: float) -> None:
        """Stops reading, answers what was read (within the deadline), then closes."""
        for conn in list(self.connections):
            conn._pause_reading("draining")
        try:
            await asyncio.wait_for(
                asyncio.gather(*(c.drain() for c in list(self.connections))), timeout_s
            )
        except TimeoutError:
            log.warning("drain deadline of %.1fs passed with requests unanswered", timeout_s)
        for conn in list(self.connections):
            conn.abort("node shutting down")
            conn.close_transport()  # one that lingered after its last answer, too


__all__ = ["KafkaConnection", "KafkaServer", "ListenerConfig"]
