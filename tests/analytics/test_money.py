"""Dollar amounts on the dashboard read as people write them, at every magnitude."""

from __future__ import annotations

import pytest

from zonegate.analytics.charts import usd, usd_column

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (0, "$0.00"),
        (2.16e-05, "$0.000022"),  # the demo's cost, once shown as $2.16e-05
        (-2.03e-05, "-$0.00002"),
        (0.0093, "$0.0093"),
        (0.0099999, "$0.01"),
        (0.05, "$0.05"),
        (0.5, "$0.50"),
        (12.345, "$12.35"),
        (2632.5, "$2,632.50"),
        (123456.7, "$123,457"),
        (4.2e-15, "<$0.000001"),
        (-4.2e-15, ">-$0.000001"),
    ],
)
def test_usd(amount: float, shown: str) -> None:
    assert usd(amount) == shown


def test_never_scientific_notation() -> None:
    for exponent in range(-15, 12):
        for mantissa in (1.0, 2.16, 9.999):
            for sign in (1, -1):
                text = usd(sign * mantissa * 10.0**exponent)
                assert "e" not in text.lower(), text


def test_a_column_shares_its_decimals() -> None:
    fmt = usd_column([0.0086, 0.0125, 0.01, 1e-9, 0.0])
    assert [fmt(x) for x in (0.0086, 0.0125, 0.01, 1e-9, 0.0)] == [
        "$0.0086",
        "$0.0125",
        "$0.0100",
        "<$0.000001",
        "$0.0000",
    ]
    assert usd_column([7.05, 8.7])(8.7) == "$8.70"
