"""Dollar amounts on the dashboard follow one rule: three significant figures, any size."""

from __future__ import annotations

import re

import pytest

from zonegate.analytics.money import axis_ticks, usd

pytestmark = pytest.mark.unit

# An amount as the dashboard writes it; the rule's exceptions are zero and the floor.
AMOUNT = re.compile(r"^-?\$(?P<num>\d{1,3}(,\d{3})*(\.\d+)?)(?P<suffix>[kMBT]?)$")


def figures(text: str) -> int:
    """Significant figures of an amount written by `usd` (-1 if it is not one)."""
    m = AMOUNT.match(text)
    if m is None:
        return -1
    digits = m.group("num").replace(",", "").replace(".", "").lstrip("0")
    return len(digits)


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (0, "$0"),
        (2.16e-05, "$0.0000216"),  # the demo's cost, once shown as $2.16e-05
        (-2.03e-05, "-$0.0000203"),
        (0.0093, "$0.00930"),
        (0.0099999, "$0.0100"),  # rounding carries it up a digit
        (0.05, "$0.0500"),
        (0.5, "$0.500"),
        (12.345, "$12.3"),
        (235.07, "$235"),
        (999.6, "$1.00k"),  # not $1000: the suffix follows the rounded amount
        (2632.5, "$2.63k"),
        (123456.7, "$123k"),
        (4.2e6, "$4.20M"),
        (4.2e-15, "<$0.000001"),
        (-4.2e-15, ">-$0.000001"),
    ],
)
def test_usd(amount: float, shown: str) -> None:
    assert usd(amount) == shown


def test_three_figures_at_every_magnitude() -> None:
    for exponent in range(-6, 14):  # up to $999T; above, whole trillions
        for mantissa in (1.0, 2.16, 4.995, 9.999, 9.9951):
            for sign in (1, -1):
                text = usd(sign * mantissa * 10.0**exponent)
                assert "e" not in text.lower(), text
                assert figures(text) == 3, text


def test_the_figures_check_can_fail() -> None:
    assert figures("$12.35") == 4 and figures("$0.05") == 1 and figures("$2.16e-05") == -1


@pytest.mark.parametrize("top", [0.0069, 1, 63.4, 1743.77, 2.2e-5, 106.2, 9.99e5])
def test_axis_ticks_are_round_and_cover_the_top(top: float) -> None:
    ticks = axis_ticks(top)
    assert ticks[0] == 0 and ticks[-1] >= top and len(ticks) <= 6
    steps = {round(b - a, 12) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len({round(s / ticks[1], 6) for s in steps}) == 1, ticks  # evenly spaced
    assert all(figures(usd(t)) == 3 for t in ticks[1:]), [usd(t) for t in ticks]
