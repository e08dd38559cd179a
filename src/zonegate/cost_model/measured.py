"""Cost of measured usage: quantities summed from usage records, priced linearly.

Every price is per unit of one quantity, so the cost of a table is the sum of
its rows' costs and can be split by topic, client, zone or day. `usage_rates`
gives the per-unit coefficients (the Spark job multiplies columns by them);
`cost_of_usage` applies the same coefficients to totals. The report prices the
same traffic as Apache Kafka would have moved it with cost_model/kafka.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from zonegate.cost_model.breakdown import MONTH_S, CostBreakdown
from zonegate.cost_model.prices import GIB, PriceTable


@dataclass(frozen=True)
class UsageTotals:
    """Quantities of one slice of usage records (docs/usage-records.md)."""

    cross_zone_bytes: float = 0.0  # each crossing counted once
    s3_put_requests: float = 0.0
    s3_get_requests: float = 0.0
    s3_other_requests: float = 0.0
    s3_put_bytes: float = 0.0
    s3_get_bytes: float = 0.0
    stored_byte_seconds: float = 0.0  # stored_bytes x interval length, summed
    # Of s3_other_requests, those counted apart (schema 2): LIST and DeleteObjects.
    s3_list_requests: float = 0.0
    s3_delete_requests: float = 0.0


@dataclass(frozen=True)
class UsageRates:
    """USD per unit of each quantity in `UsageTotals`."""

    cross_zone_out_per_byte: float  # charged to the sending zone
    cross_zone_in_per_byte: float  # charged to the receiving zone
    s3_put_per_request: float
    s3_get_per_request: float
    # Schema-1 records count LIST/DELETE/HEAD as one: priced at the PUT class (LIST's
    # rate), an upper bound since DELETE is free and HEAD is GET-priced. Schema 2
    # counts LIST and DeleteObjects apart, each at its own price.
    s3_other_per_request: float
    s3_list_per_request: float
    s3_delete_per_request: float
    s3_put_per_byte: float
    s3_get_per_byte: float
    storage_per_byte_second: float

    @property
    def cross_zone_per_byte(self) -> float:
        return self.cross_zone_out_per_byte + self.cross_zone_in_per_byte


def usage_rates(prices: PriceTable, storage_class: str = "standard") -> UsageRates:
    s3 = prices.object_storage(storage_class)
    return UsageRates(
        cross_zone_out_per_byte=prices.cross_zone_out_per_gib / GIB,
        cross_zone_in_per_byte=prices.cross_zone_in_per_gib / GIB,
        s3_put_per_request=s3.put_per_1000 / 1000,
        s3_get_per_request=s3.get_per_1000 / 1000,
        s3_other_per_request=s3.put_per_1000 / 1000,
        s3_list_per_request=s3.put_per_1000 / 1000,
        s3_delete_per_request=s3.delete_per_1000 / 1000,
        s3_put_per_byte=s3.upload_per_gib / GIB,
        s3_get_per_byte=s3.retrieval_per_gib / GIB,
        storage_per_byte_second=s3.storage_per_gib_month / GIB / MONTH_S,
    )


def other_requests_usd(other: float, listed: float, deleted: float, rates: UsageRates) -> float:
    """LIST and DeleteObjects at their prices, the rest of the "other" count (schema 1's,
    where nothing is counted apart) at the upper bound."""
    return (
        (other - listed - deleted) * rates.s3_other_per_request
        + listed * rates.s3_list_per_request
        + deleted * rates.s3_delete_per_request
    )


def s3_request_usd(
    puts: float, gets: float, other: float, listed: float, deleted: float, rates: UsageRates
) -> float:
    """What the requests themselves cost (not the bytes they move)."""
    return (
        puts * rates.s3_put_per_request
        + gets * rates.s3_get_per_request
        + other_requests_usd(other, listed, deleted, rates)
    )


def cost_of_usage(t: UsageTotals, rates: UsageRates) -> CostBreakdown:
    return CostBreakdown(
        cross_zone_transfer=t.cross_zone_bytes * rates.cross_zone_per_byte,
        s3_put=t.s3_put_requests * rates.s3_put_per_request
        + other_requests_usd(t.s3_other_requests, t.s3_list_requests, t.s3_delete_requests, rates)
        + t.s3_put_bytes * rates.s3_put_per_byte,
        s3_get=t.s3_get_requests * rates.s3_get_per_request
        + t.s3_get_bytes * rates.s3_get_per_byte,
        s3_storage=t.stored_byte_seconds * rates.storage_per_byte_second,
    )
