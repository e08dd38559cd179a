"""Attributes each Kafka request's bytes to kind, zones and topic for the node's accounting.

Produce requests count as `produce_data`, Fetch as `fetch_data`, the rest as
`other`; the peer is the client, whose zone the router resolved. A request
naming several topics has its bytes split evenly among them (the frame does
not say which bytes belong to which topic beyond the records).
"""

from __future__ import annotations

from typing import Any

from zonegate.proxy.context import RequestContext
from zonegate.usage.accounting import FETCH_DATA, OTHER, PRODUCE_DATA

_KIND = {0: PRODUCE_DATA, 1: FETCH_DATA}


def _topics(api_key: int, body: Any) -> list[str]:
    if api_key == 0:
        return [t.name for t in body.topic_data]
    if api_key == 1:
        return [t.topic for t in body.topics]
    return []


def account_request(ctx: RequestContext, body: Any, response_bytes: int) -> None:
    services = ctx.services
    client_zone = ctx.client_zone
    client_id = ctx.client_id or ""
    kind = _KIND.get(ctx.api_key, OTHER)
    topics = _topics(ctx.api_key, body) or [""]
    n = len(topics)
    for i, topic in enumerate(topics):
        leader_zone = ""
        t = services.topics.get(topic) if topic else None
        if t is not None and t.partitions:
            leader_zone = services.cluster.zone_of(t.partitions[0].leader_node)
        # Integer split that still sums to the exact totals.
        bytes_in = ctx.request_bytes // n + (1 if i < ctx.request_bytes % n else 0)
        bytes_out = response_bytes // n + (1 if i < response_bytes % n else 0)
        services.accounting.add(
            kind,
            client_zone=client_zone,
            peer_zone=client_zone,
            leader_zone=leader_zone,
            topic=topic,
            client_id=client_id,
            bytes_in=bytes_in,
            bytes_out=bytes_out,
            requests=1 if i == 0 else 0,
        )
