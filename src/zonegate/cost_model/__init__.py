"""Price tables and pure cost functions, shared by `zonegate cost` and the report job."""

from zonegate.cost_model.breakdown import LINE_ITEMS, MONTH_S, CostBreakdown
from zonegate.cost_model.kafka import kafka_cost
from zonegate.cost_model.measured import (
    UsageRates,
    UsageTotals,
    cost_of_usage,
    usage_rates,
)
from zonegate.cost_model.price_tables import PRICE_TABLES, known_regions, price_table
from zonegate.cost_model.prices import PriceTable, UnknownPrice
from zonegate.cost_model.whatif import Assumptions, Scenario, Workload, compare

__all__ = [
    "LINE_ITEMS",
    "MONTH_S",
    "PRICE_TABLES",
    "Assumptions",
    "CostBreakdown",
    "PriceTable",
    "Scenario",
    "UnknownPrice",
    "UsageRates",
    "UsageTotals",
    "Workload",
    "compare",
    "cost_of_usage",
    "kafka_cost",
    "known_regions",
    "price_table",
    "usage_rates",
]
