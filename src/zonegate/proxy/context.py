"""What a handler knows about the request it serves: the node, the client, the header."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zonegate.broker.node import Node


@dataclass(frozen=True, slots=True)
class ClientInfo:
    host: str
    port: int
    connection_id: int


@dataclass(frozen=True, slots=True)
class RequestContext:
    node: Node
    client: ClientInfo
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request_bytes: int
    # True when another node passed this request on (a group call for a group we own).
    forwarded: bool = False
