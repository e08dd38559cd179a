"""Group calls go to the group's coordinator, wherever the client connected.

FindCoordinator names a node of the client's own zone; when that node does
not coordinate the group itself, it passes the Kafka request body over gRPC
(`Coordinate`) to the node that does (`node.group_owner`) and hands the answer
back. Clients keep all their connections inside their zone; only group
metadata crosses, counted as forwarding RPC bytes.

When the owner cannot be reached (it died), the call waits, up to a lease
and a bit, for the membership view to name another owner, and goes there (or
is answered here): the client's connection to this node, which also carries
its fetches, stays open, as it would with Kafka, where the coordinator's death
does not touch the client's other connections. Only if the view still names the
unreachable node after that is the call refused.

A node asked to coordinate a group it does not own (two nodes briefly
disagreeing about live members) refuses rather than keep a second copy of the
group; the client's connection is then closed and it looks the coordinator up
again, as Kafka clients do after losing their coordinator.
"""

from __future__ import annotations

import asyncio
import io
import time
from typing import TYPE_CHECKING, Any

from kio.static.protocol import RequestPayload, ResponsePayload

from zonegate.leader_forwarder.grpc_client import LeaderUnavailable
from zonegate.proxy.codec import _writer, request_type, response_type
from zonegate.proxy.context import ClientInfo, RequestContext
from zonegate.proxy.decoder import MalformedMessage, message_reader

if TYPE_CHECKING:
    from zonegate.broker.node import Node


class NotCoordinator(Exception):
    pass


def _encode(entity: RequestPayload | ResponsePayload) -> bytes:
    buf = io.BytesIO()
    _writer(type(entity))(buf, entity)
    return buf.getvalue()


async def on_owner(
    ctx: RequestContext, group_id: str, request: Any, timeout_s: float = 30.0
) -> Any | None:
    """The owner's answer when another node coordinates `group_id`; None to answer here."""
    node = ctx.node
    payload: bytes | None = None  # encoded once, and only if the call is passed on
    # A dead owner leaves the live set within its lease; then the group has a new one.
    deadline = time.monotonic() + node.config.lease_ms / 1000 + 2.0
    unreachable: int | None = None
    delay = 0.05
    while True:
        owner = node.group_owner(group_id)
        if owner == node.config.node_id:
            return None
        if ctx.forwarded:
            raise NotCoordinator(
                f"group {group_id!r}: forwarded here, but node {owner} coordinates it"
            )
        remote = node.coordinator_peer(owner) if owner != unreachable else None
        if remote is not None:
            if payload is None:
                payload = _encode(request)
            try:
                body = await remote.coordinate(
                    ctx.api_key,
                    ctx.api_version,
                    payload,
                    client_id=ctx.client_id or "",
                    client_host=ctx.client.host,
                    timeout_s=timeout_s,
                )
                break
            except LeaderUnavailable as exc:
                if not exc.unreachable:
                    raise  # reached and slow or failing: no other owner is coming
                # Not retried on the same node: the call may have reached it.
                unreachable = owner
        if time.monotonic() >= deadline:
            raise NotCoordinator(f"group {group_id!r}: coordinator node {owner} is not reachable")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)
    answer, _ = message_reader(response_type(ctx.api_key, ctx.api_version))(body, 0)
    return answer


async def serve_forwarded(
    node: Node, api_key: int, api_version: int, body: bytes, client_id: str, client_host: str
) -> bytes:
    """Runs a request another node passed on through this node's own handler."""
    from zonegate.proxy.registry import REGISTRY

    reg = REGISTRY.lookup(api_key)
    if reg is None or not reg.min_version <= api_version <= reg.max_version:
        raise NotCoordinator(f"api_key={api_key} v{api_version} is not served")
    try:
        request, _ = message_reader(request_type(api_key, api_version))(body, 0)
    except MalformedMessage as exc:
        raise NotCoordinator(f"api_key={api_key} v{api_version}: {exc}") from None
    ctx = RequestContext(
        node=node,
        client=ClientInfo(client_host, 0, -1),
        api_key=api_key,
        api_version=api_version,
        correlation_id=0,
        client_id=client_id or None,
        request_bytes=len(body),
        forwarded=True,
    )
    response = await reg.handler(ctx, request)
    if response is None:
        raise NotCoordinator(f"api_key={api_key}: no answer to pass back")
    return _encode(response)
