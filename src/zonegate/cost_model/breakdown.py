"""A cost split into the line items every scenario and report shows, in USD."""

from __future__ import annotations

from dataclasses import dataclass, fields

# One month, for GiB-month prices and "monthly" figures: 30 days, the month the
# published Kafka comparisons use (AWS's calculators use 730 h; the difference is 1.4%).
MONTH_S = 30 * 86_400

LINE_ITEMS: tuple[tuple[str, str], ...] = (
    ("cross_zone_transfer", "Cross-zone transfer"),
    ("s3_put", "S3 PUT"),
    ("s3_get", "S3 GET"),
    ("s3_storage", "S3 storage"),
    ("block_storage", "Block storage"),
)


@dataclass(frozen=True)
class CostBreakdown:
    cross_zone_transfer: float = 0.0
    s3_put: float = 0.0
    s3_get: float = 0.0
    s3_storage: float = 0.0
    block_storage: float = 0.0

    @property
    def total(self) -> float:
        return float(sum(getattr(self, f.name) for f in fields(self)))

    def as_dict(self) -> dict[str, float]:
        out = {f.name: float(getattr(self, f.name)) for f in fields(self)}
        out["total"] = self.total
        return out
