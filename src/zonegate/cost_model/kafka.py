"""What Apache Kafka would cost for a given volume of traffic: replicas on disks in several zones.

Shared by the what-if model (volumes from a workload) and the report's baseline
(volumes measured from usage records), so both compare against the same Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from zonegate.cost_model.breakdown import MONTH_S, CostBreakdown
from zonegate.cost_model.prices import GIB, PriceTable


@dataclass(frozen=True)
class LeaderCross:
    """Produce and Fetch bytes (requests and answers) that a leader-routed Kafka moves
    across zones between clients and partition leaders, as measured."""

    produce: float
    fetch: float


def replica_spread(rf: int, zones: int) -> list[int]:
    """Replicas per zone when rack awareness spreads `rf` replicas as evenly as it can."""
    used = min(rf, zones)
    return [rf // used + (1 if i < rf % used else 0) for i in range(used)]


def remote_follower_copies(rf: int, zones: int) -> float:
    """Expected follower copies outside the leader's zone, leadership spread evenly over replicas.

    RF=3 over three zones gives 2 (every follower is remote); over two zones 4/3.
    """
    if rf <= 0 or zones <= 0:
        raise ValueError("rf and zones must be positive")
    spread = replica_spread(rf, zones)
    return sum(c * (rf - c) for c in spread) / rf


def kafka_cross_zone_bytes(
    produce_bytes: float,
    consume_bytes: float,
    zones: int,
    *,
    rf: int = 3,
    fetch_from_follower: bool,
    leader_cross: LeaderCross | None = None,
) -> float:
    """Bytes that cross zones: producers to leaders, leaders to followers, consumers' reads.

    Without `leader_cross`, clients are spread evenly over the zones, leaders too,
    so a client reaches a leader in another zone (zones-1)/zones of the time. With
    it, the client-to-leader crossings are those measured (each partition's
    leader's zone against its clients'). With fetch-from-follower a consumer
    reads a replica in its own zone when its zone holds one.
    """
    remote = (zones - 1) / zones
    if leader_cross is None:
        produce = produce_bytes * remote
        consume_to_leader = consume_bytes * remote
    else:
        produce = leader_cross.produce
        consume_to_leader = leader_cross.fetch
    replication = produce_bytes * remote_follower_copies(rf, zones)
    if fetch_from_follower:
        zones_without_replica = zones - min(rf, zones)
        consume = consume_bytes * zones_without_replica / zones
    else:
        consume = consume_to_leader
    return produce + replication + consume


def kafka_cost(
    produce_bytes: float,
    consume_bytes: float,
    stored_byte_seconds: float,
    zones: int,
    prices: PriceTable,
    *,
    rf: int = 3,
    fetch_from_follower: bool,
    leader_cross: LeaderCross | None = None,
) -> CostBreakdown:
    """Cost of Kafka moving these bytes and keeping `rf` copies of what was stored on disks.

    `stored_byte_seconds` is one copy of the retained log integrated over time;
    disks are priced as filled exactly (no headroom), so this is Kafka's lower bound.
    """
    cross = kafka_cross_zone_bytes(
        produce_bytes,
        consume_bytes,
        zones,
        rf=rf,
        fetch_from_follower=fetch_from_follower,
        leader_cross=leader_cross,
    )
    disk_gib_months = stored_byte_seconds * rf / GIB / MONTH_S
    return CostBreakdown(
        cross_zone_transfer=cross / GIB * prices.cross_zone_per_gib,
        block_storage=disk_gib_months * prices.block_storage_per_gib_month,
    )
