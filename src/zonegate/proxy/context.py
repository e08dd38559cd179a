"""What a handler knows about the request it serves: who asks, from where, and the services.

Never the node: handlers reach the rest of zonegate only through the narrow
services of `services.api`, so what a handler can touch is written down in one
place and a handler is tested over fakes of those services (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zonegate.proxy.auth import ConnectionAuth
    from zonegate.services.api import Services


@dataclass(frozen=True, slots=True)
class ClientInfo:
    host: str
    port: int
    connection_id: int

    def describe(self) -> str:
        return f"connection {self.connection_id} from {self.host}:{self.port}"


@dataclass(slots=True)
class Throttle:
    """How long the client must wait (Kafka's throttle_time_ms): the largest of what its
    quotas asked. The listener mutes the connection that long after the answer."""

    ms: int = 0

    def at_least(self, ms: int) -> None:
        self.ms = max(self.ms, ms)


@dataclass(frozen=True, slots=True)
class RequestContext:
    services: Services
    principal: str  # "User:ANONYMOUS" until SASL exists
    listener: str  # the listener's name, as Kafka's listener names ("PLAINTEXT")
    client: ClientInfo
    client_zone: str  # resolved by the router: client.id tag, CIDR map, or this node's zone
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request_bytes: int
    received_at: float = 0.0  # time.perf_counter() when the request was read
    throttle: Throttle = field(default_factory=Throttle)
    auth: ConnectionAuth | None = None  # the connection's authentication (SASL handlers)
