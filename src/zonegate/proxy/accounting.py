"""Attributes each Kafka request's bytes to kind, zones, topic and partition leader.

Produce requests count as `produce_data`, Fetch as `fetch_data`, the rest as
`other`; the peer is the client, whose zone the router resolved, and each row
carries the request's principal (the request context's). Produce and
Fetch are attributed per partition (docs/usage-records.md): each partition's
record batches (the request's for Produce, the answer's for Fetch) go to its
topic and to the zone of its leader at the time, and the rest of the request
and of the answer (headers, offsets, error codes) is split in proportion to
those batch bytes. A request that moved no batch bytes splits evenly among the
partitions it named. The integer split keeps every sum equal to the wire bytes.
A client of another zone than the node's gets a cross-zone reason: an outage when
its zone's nodes are all gone (it is served here because its zone was lost),
routed when its zone had a node it did not reach.
"""

from __future__ import annotations

from typing import Any

from zonegate.proxy.context import RequestContext
from zonegate.usage.accounting import FETCH_DATA, OTHER, PRODUCE_DATA
from zonegate.usage.schema import OUTAGE, ROUTED

_KIND = {0: PRODUCE_DATA, 1: FETCH_DATA}

# One partition of a request: (topic, partition index, batch bytes).
Share = tuple[str, int, int]


def _produce_shares(body: Any) -> list[Share]:
    return [
        (t.name, pd.index, len(pd.records or b""))
        for t in body.topic_data
        for pd in getattr(t, "partition_data", ())
    ]


def _fetch_shares(body: Any, response: Any) -> list[Share]:
    """The answer's partitions and their batches; with no answer (or a throttled, empty
    one) the partitions the request named, with no batch bytes."""
    responses = getattr(response, "responses", None) if response is not None else None
    if responses:
        return [
            (t.topic, p.partition_index, len(p.records or b""))
            for t in responses
            for p in t.partitions
        ]
    return [(t.topic, p.partition, 0) for t in body.topics for p in getattr(t, "partitions", ())]


def split(total: int, weights: list[int]) -> list[int]:
    """`total` in proportion to `weights` (evenly when they are all 0), in integers that
    sum to `total` exactly: each part is the difference of two rounded-down prefixes."""
    if not weights:
        return []
    w_sum = sum(weights)
    if w_sum == 0:
        weights, w_sum = [1] * len(weights), len(weights)
    out: list[int] = []
    cum = prev = 0
    for w in weights:
        cum += w
        upto = total * cum // w_sum
        out.append(upto - prev)
        prev = upto
    return out


def _leader_zone(ctx: RequestContext, topic: str, partition: int) -> str:
    t = ctx.services.topics.get(topic)
    if t is None or not t.partitions:
        return ""
    parts = t.partitions
    p = parts[partition] if 0 <= partition < len(parts) else None
    if p is None or p.partition != partition:  # not in index order: look it up
        p = next((q for q in parts if q.partition == partition), None)
    return "" if p is None else ctx.services.cluster.zone_of(p.leader_node)


def cross_zone_reason(ctx: RequestContext) -> str:
    """Why this request's client, of another zone than this node, is served here: OUTAGE
    when its zone has nodes but none live with the client's listener, else ROUTED (a zone
    with a node it did not reach, or one where the cluster never had a node); "" when
    the client is of this node's zone or of no known zone."""
    zone = ctx.client_zone
    if not zone or zone == ctx.services.accounting.node_zone:
        return ""
    return OUTAGE if ctx.services.cluster.zone_served(zone, ctx.listener) is False else ROUTED


def account_request(
    ctx: RequestContext, body: Any, response_bytes: int, response: Any = None
) -> None:
    """Adds one answered request to the node's accounting: `response_bytes` is the size
    of the answer's frame (0 when none was sent), `response` the answer sent (Fetch's
    batches are read from it)."""
    services = ctx.services
    client_zone = ctx.client_zone
    client_id = ctx.client_id or ""
    principal = ctx.principal
    reason = cross_zone_reason(ctx)
    kind = _KIND.get(ctx.api_key, OTHER)
    if ctx.api_key == 0:
        shares = _produce_shares(body)
    elif ctx.api_key == 1:
        shares = _fetch_shares(body, response)
    else:
        shares = []
    if not shares:
        services.accounting.add(
            kind,
            client_zone=client_zone,
            peer_zone=client_zone,
            topic="",
            client_id=client_id,
            principal=principal,
            cross_zone_reason=reason,
            bytes_in=ctx.request_bytes,
            bytes_out=response_bytes,
            requests=1,
        )
        return
    weights = [n for _, _, n in shares]
    batches = sum(weights)
    # The batches themselves travel in the request (Produce) or the answer (Fetch);
    # the rest of both frames is overhead, shared by the batches' sizes. (A frame
    # never holds fewer bytes than its batches; if it did, all of it is overhead.)
    none = [0] * len(shares)
    batch_in, batch_out = none, none
    overhead_in, overhead_out = ctx.request_bytes, response_bytes
    if kind == PRODUCE_DATA and batches <= ctx.request_bytes:
        batch_in, overhead_in = weights, ctx.request_bytes - batches
    elif kind == FETCH_DATA and batches <= response_bytes:
        batch_out, overhead_out = weights, response_bytes - batches
    extra_in = split(overhead_in, weights)
    extra_out = split(overhead_out, weights)
    # Partitions of one topic led in one zone share a key: sum them first.
    sums: dict[tuple[str, str], list[int]] = {}
    for i, (topic, partition, _) in enumerate(shares):
        key = (topic, _leader_zone(ctx, topic, partition))
        s = sums.setdefault(key, [0, 0])
        s[0] += batch_in[i] + extra_in[i]
        s[1] += batch_out[i] + extra_out[i]
    # A partition that moved nothing (a Produce of no records) makes no row of zeros.
    moved = [(k, s) for k, s in sums.items() if s[0] or s[1]] or list(sums.items())[:1]
    for i, ((topic, leader_zone), (b_in, b_out)) in enumerate(moved):
        services.accounting.add(
            kind,
            client_zone=client_zone,
            peer_zone=client_zone,
            leader_zone=leader_zone,
            topic=topic,
            client_id=client_id,
            principal=principal,
            cross_zone_reason=reason,
            bytes_in=b_in,
            bytes_out=b_out,
            requests=1 if i == 0 else 0,
        )
