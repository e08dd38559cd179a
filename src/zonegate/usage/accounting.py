"""Counts every byte a node sends or receives, by who it served and where it went.

Keys follow docs/usage-records.md: (kind, client zone, peer zone, leader zone,
topic, client id, principal, cross-zone reason). Two views: cumulative totals for
/metrics, and per-interval deltas that the usage writer drains into Parquet records.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

PRODUCE_DATA = "produce_data"
FETCH_DATA = "fetch_data"
FORWARD_RPC = "forward_rpc"
OTHER = "other"


class TrafficKey(NamedTuple):
    # A tuple rather than a frozen dataclass: it keys two dicts on every request, and
    # a tuple is cheaper to build and hashes and compares in C.
    kind: str
    client_zone: str
    peer_zone: str
    leader_zone: str
    topic: str
    client_id: str
    principal: str = ""  # the client's (User:alice), "" for node and S3 traffic
    cross_zone_reason: str = ""  # usage.schema.OUTAGE or ROUTED when a client's bytes crossed


@dataclass(slots=True)
class Counts:
    bytes_in: int = 0
    bytes_out: int = 0
    requests: int = 0

    def add(self, bytes_in: int, bytes_out: int, requests: int) -> None:
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out
        self.requests += requests


class Accounting:
    def __init__(self, node_id: int, node_zone: str) -> None:
        self.node_id = node_id
        self.node_zone = node_zone
        self.totals: dict[TrafficKey, Counts] = defaultdict(Counts)
        self._interval: dict[TrafficKey, Counts] = defaultdict(Counts)

    def add(
        self,
        kind: str,
        *,
        client_zone: str = "",
        peer_zone: str = "",
        leader_zone: str = "",
        topic: str = "",
        client_id: str = "",
        principal: str = "",
        cross_zone_reason: str = "",
        bytes_in: int = 0,
        bytes_out: int = 0,
        requests: int = 0,
    ) -> None:
        key = TrafficKey(
            kind,
            client_zone,
            peer_zone,
            leader_zone,
            topic,
            client_id,
            principal,
            cross_zone_reason,
        )
        self.totals[key].add(bytes_in, bytes_out, requests)
        self._interval[key].add(bytes_in, bytes_out, requests)

    def drain_interval(self) -> dict[TrafficKey, Counts]:
        out, self._interval = self._interval, defaultdict(Counts)
        return out

    def cross_zone_bytes(self) -> int:
        return sum(
            c.bytes_in + c.bytes_out
            for k, c in self.totals.items()
            if k.peer_zone and k.peer_zone != self.node_zone
        )
