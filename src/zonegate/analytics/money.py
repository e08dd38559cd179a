"""How the dashboard writes amounts of money: one rule, for cards, tables and chart axes.

Every amount shows three significant figures (`$0.0216`, `$0.500`, `$12.3`,
`$235`, `$1.74k`, `$2.63M`): amounts a reader compares side by side then carry
the same precision whatever their size, so a demo's fractions of a cent and a
month of a busy cluster read alike. Thousands and up take a suffix (k, M, B, T)
rather than trailing zeros that would look exact (`$1,740`). Zero is `$0`;
closer to zero than a millionth of a dollar is `<$0.000001` (`>-$0.000001`),
the one place the rule stops, since digits there mean nothing to a bill. Never
scientific notation. Unit prices as a provider states them are not amounts and
keep their own digits (`dashboard._price`).
"""

from __future__ import annotations

import math

FIGURES = 3
FLOOR = 1e-6
_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def _rounded(a: float) -> float:
    """`a` (> 0) rounded to FIGURES significant figures, exactly as printed below."""
    return float(f"{a:.{FIGURES}g}")


def _figures(a: float) -> str:
    """A positive number already rounded, written with exactly FIGURES significant figures."""
    decimals = max(0, FIGURES - 1 - math.floor(math.log10(a)))
    return f"{a:,.{decimals}f}"


def usd(x: float) -> str:
    """`x` dollars with three significant figures: `$0.0000216`, `$12.3`, `$1.74k`."""
    sign, a = ("-" if x < 0 else ""), abs(float(x))
    if a == 0:
        return "$0"
    if a < FLOOR:
        return ">-$0.000001" if sign else "<$0.000001"
    r = _rounded(a)  # round first: $999.6 is $1.00k, not $1000
    for div, suffix in _SUFFIXES:
        if r >= div:
            return f"{sign}${_figures(_rounded(r / div))}{suffix}"
    return f"{sign}${_figures(r)}"


def axis_ticks(top: float, count: int = 4) -> list[float]:
    """Round tick values from 0 past `top` (1, 2, 2.5 or 5 times a power of ten apart),
    so an axis labelled with `usd` reads $0, $500, $1.00k, $1.50k, ..."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    n = math.ceil(top / step - 1e-9)
    return [_rounded(step * k) if k else 0.0 for k in range(n + 1)]
