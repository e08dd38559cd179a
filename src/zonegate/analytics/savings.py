"""Savings against Apache Kafka, computed on the driver from the report's daily totals.

The measured zonegate cost and the Kafka baselines come from the same
`cost_model` functions `zonegate cost` uses, applied to the measured volumes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zonegate.cost_model.breakdown import CostBreakdown
from zonegate.cost_model.kafka import LeaderCross, kafka_cost
from zonegate.cost_model.prices import PriceTable


@dataclass(frozen=True)
class Savings:
    zonegate: CostBreakdown
    kafka: CostBreakdown
    kafka_fff: CostBreakdown

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for name, cost in (
            ("zonegate (measured)", self.zonegate),
            ("Apache Kafka RF=3", self.kafka),
            ("Apache Kafka RF=3 + fetch-from-follower", self.kafka_fff),
        ):
            saved = cost.total - self.zonegate.total
            out.append(
                {
                    "scenario": name,
                    **{f"{k}_usd": v for k, v in cost.as_dict().items()},
                    "zonegate_saves_usd": saved,
                    "zonegate_saves_pct": 100.0 * saved / cost.total if cost.total else 0.0,
                }
            )
        return out


def _sum(rows: Sequence[Mapping[str, Any]], key: str) -> float:
    return float(sum(r[key] or 0 for r in rows))


def measured_breakdown(daily_rows: Sequence[Mapping[str, Any]]) -> CostBreakdown:
    return CostBreakdown(
        cross_zone_transfer=_sum(daily_rows, "transfer_usd"),
        s3_put=_sum(daily_rows, "s3_put_usd"),
        s3_get=_sum(daily_rows, "s3_get_usd"),
        s3_storage=_sum(daily_rows, "s3_storage_usd"),
    )


def leader_cross(row: Mapping[str, Any], zones: int) -> LeaderCross:
    """Client-to-leader bytes across zones: measured where the records name both zones
    (per partition), the even-spread formula's share of the rest."""
    remote = (zones - 1) / zones

    def side(k: str) -> float:
        crossed = float(row.get(f"leader_cross_{k}_bytes") or 0)
        return crossed + remote * float(row.get(f"leader_unknown_{k}_bytes") or 0)

    return LeaderCross(produce=side("produce"), fetch=side("fetch"))


def kafka_for_day(
    row: Mapping[str, Any], zones: int, prices: PriceTable, *, fetch_from_follower: bool
) -> CostBreakdown:
    zones = max(zones, 1)
    return kafka_cost(
        float(row["produce_bytes"] or 0),
        float(row["fetch_bytes"] or 0),
        float(row["stored_byte_seconds"] or 0),
        zones,  # records that name no zone: one, not a division by zero
        prices,
        fetch_from_follower=fetch_from_follower,
        leader_cross=leader_cross(row, zones) if "leader_cross_produce_bytes" in row else None,
    )


def savings(daily_rows: Sequence[Mapping[str, Any]], zones: int, prices: PriceTable) -> Savings:
    keys = ["produce_bytes", "fetch_bytes", "stored_byte_seconds"]
    if daily_rows and "leader_cross_produce_bytes" in daily_rows[0]:
        keys += [
            f"leader_{w}_{k}_bytes" for w in ("cross", "unknown") for k in ("produce", "fetch")
        ]
    totals = {k: _sum(daily_rows, k) for k in keys}
    return Savings(
        zonegate=measured_breakdown(daily_rows),
        kafka=kafka_for_day(totals, zones, prices, fetch_from_follower=False),
        kafka_fff=kafka_for_day(totals, zones, prices, fetch_from_follower=True),
    )
