"""Inline SVG charts for the dashboard: drawn here, in Python, so the page needs no library.

Each function returns one `<svg>` string; hovering a mark shows its exact value
(an SVG `<title>`), so the charts stay readable with no script at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

PALETTE = ("#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#d53f8c", "#718096")
Fmt = Callable[[float], str]


def usd(x: float) -> str:
    """Dollars as people write them: `$1,234.50`, `$0.12`; below a cent, two significant
    digits in plain decimals (`$0.000022`), never scientific notation; closer to zero
    than a millionth of a dollar, `<$0.000001` (`>-$0.000001` below zero)."""
    sign, a = ("-" if x < 0 else ""), abs(x)
    if a == 0:
        return "$0.00"
    if a >= 100_000:
        return f"{sign}${a:,.0f}"
    if a >= 1:
        return f"{sign}${a:,.2f}"
    if a < 1e-6:
        return ">-$0.000001" if sign else "<$0.000001"
    # Below a dollar, two significant digits and at least cents: $0.50, $0.012, $0.000022.
    decimals = max(2, -math.floor(math.log10(a)) + 1)
    text = f"{a:.{decimals}f}"
    if decimals > 2 and float(text) >= 10 ** (2 - decimals):
        text = f"{a:.{decimals - 1}f}"  # rounding carried it up a digit: $0.0099 -> $0.010
    whole, frac = text.split(".")
    frac = frac.rstrip("0").ljust(2, "0")  # $0.050 -> $0.05, as people write it
    return f"{sign}${whole}.{frac}"


def usd_column(values: Sequence[float]) -> Fmt:
    """A formatter for a column of dollar amounts: the decimals that give its smallest
    amount (of a millionth of a dollar or more) two significant digits, cents at least."""
    small = [abs(v) for v in values if abs(v) >= 1e-6]
    decimals = 2
    if small and min(small) < 1:
        decimals = min(6, max(2, -math.floor(math.log10(min(small))) + 1))

    def fmt(x: float) -> str:
        a = abs(x)
        if a == 0:
            return "$0." + "0" * decimals
        if a < 1e-6 or a >= 100_000:
            return usd(x)
        return f"{'-' if x < 0 else ''}${a:,.{decimals}f}"

    return fmt


def size(x: float) -> str:
    for unit, div in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(x) >= div:
            return f"{x / div:,.1f} {unit}"
    return f"{x:,.0f} B"


def _svg(w: float, h: float, parts: Sequence[str]) -> str:
    return f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}">{"".join(parts)}</svg>'


def _text(x: float, y: float, s: str, anchor: str = "start", cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}>{escape(s)}</text>'


def hbars(items: Sequence[tuple[str, float]], fmt: Fmt, *, width: int = 560) -> str:
    """Horizontal bars, largest first as given; values are printed at the bar's end."""
    if not items:
        return '<p class="empty">nothing to show</p>'
    label_w, row_h = 190, 26
    top = max(v for _, v in items) or 1.0
    plot = width - label_w - 90
    parts = []
    for i, (label, v) in enumerate(items):
        y = i * row_h
        w = max(1.0, plot * v / top) if v > 0 else 0.0
        short = label if len(label) <= 26 else label[:25] + "…"
        parts.append(_text(label_w - 8, y + 17, short, "end"))
        parts.append(
            f'<rect x="{label_w}" y="{y + 5}" width="{w:.1f}" height="{row_h - 10}" '
            f'fill="{PALETTE[0]}"><title>{escape(label)}: {escape(fmt(v))}</title></rect>'
        )
        parts.append(_text(label_w + w + 6, y + 17, fmt(v)))
    h = len(items) * row_h
    return f'<svg viewBox="0 0 {width} {h}" width="{width}" height="{h}">{"".join(parts)}</svg>'


def stacked_hbars(
    rows: Sequence[tuple[str, Sequence[float]]],
    legend: Sequence[str],
    fmt: Fmt,
    *,
    width: int = 720,
) -> str:
    """One bar per row, split into the `legend` parts; the total is printed at the end."""
    label_w, row_h = 260, 34
    top = max((sum(p) for _, p in rows), default=0.0) or 1.0
    plot = width - label_w - 110
    parts = []
    for i, (label, values) in enumerate(rows):
        y = i * row_h
        x = float(label_w)
        parts.append(_text(label_w - 8, y + 21, label, "end"))
        for j, v in enumerate(values):
            w = plot * v / top
            if w > 0:
                parts.append(
                    f'<rect x="{x:.1f}" y="{y + 6}" width="{w:.1f}" height="{row_h - 12}" '
                    f'fill="{PALETTE[j % len(PALETTE)]}"><title>{escape(label)} — '
                    f"{escape(legend[j])}: {escape(fmt(v))}</title></rect>"
                )
            x += w
        parts.append(_text(x + 6, y + 21, fmt(sum(values)), cls="total"))
    ly = len(rows) * row_h + 8
    x = float(label_w)
    for j, name in enumerate(legend):
        parts.append(
            f'<rect x="{x:.1f}" y="{ly}" width="12" height="12" '
            f'fill="{PALETTE[j % len(PALETTE)]}"/>'
        )
        parts.append(_text(x + 16, ly + 11, name))
        x += 24 + 7.5 * len(name)
    width = max(width, int(x) + 10)
    h = ly + 22
    return f'<svg viewBox="0 0 {width} {h}" width="{width}" height="{h}">{"".join(parts)}</svg>'


def lines(
    xs: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], fmt: Fmt, *, width: int = 720
) -> str:
    """A line per series over the days `xs`, with a zero-based y axis and dots to hover."""
    if not xs:
        return '<p class="empty">nothing to show</p>'
    left, right, top_pad, height = 80, 20, 10, 240
    plot_w, plot_h = width - left - right, height - 50
    top = max((max(v, default=0.0) for _, v in series), default=0.0) or 1.0
    step = plot_w / max(1, len(xs) - 1)

    def px(i: int) -> float:
        return left + (i * step if len(xs) > 1 else plot_w / 2)

    def py(v: float) -> float:
        return top_pad + plot_h * (1 - v / top)

    parts = []
    for k in range(5):
        v = top * k / 4
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{py(v):.1f}" '
            f'y2="{py(v):.1f}" class="grid"/>'
        )
        parts.append(_text(left - 6, py(v) + 4, fmt(v), "end", "axis"))
    every = max(1, math.ceil(len(xs) * 80 / plot_w))  # a date label is ~70 px wide
    for i, x in enumerate(xs):
        if i % every == 0:
            parts.append(_text(px(i), height - 24, x, "middle", "axis"))
    for j, (name, values) in enumerate(series):
        color = PALETTE[j % len(PALETTE)]
        pts = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2.5"/>')
        for i, v in enumerate(values):
            parts.append(
                f'<circle cx="{px(i):.1f}" cy="{py(v):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(name)} {escape(xs[i])}: {escape(fmt(v))}</title></circle>"
            )
        parts.append(
            f'<rect x="{left + 160 * j}" y="{height - 12}" width="12" height="12" fill="{color}"/>'
        )
        parts.append(_text(left + 160 * j + 16, height - 2, name))
    return _svg(width, height, parts)


def heatmap(zones: Sequence[str], cells: dict[tuple[str, str], float], fmt: Fmt) -> str:
    """From-zone rows, to-zone columns; darker is more bytes. The diagonal stays in its zone."""
    cell, left, top_pad = 110, 70, 40
    top = max(cells.values(), default=0.0) or 1.0
    n = len(zones)
    parts = [_text(left + n * cell / 2, 14, "to zone →", "middle", "axis")]
    for j, z in enumerate(zones):
        parts.append(_text(left + j * cell + cell / 2, top_pad - 8, z, "middle"))
    for i, src in enumerate(zones):
        parts.append(_text(left - 8, top_pad + i * cell + cell / 2 + 4, f"{src} →", "end"))
        for j, dst in enumerate(zones):
            v = cells.get((src, dst), 0.0)
            alpha = 0.08 + 0.92 * (v / top) if v > 0 else 0.0
            color = "#38a169" if src == dst else "#c53030"
            x, y = left + j * cell, top_pad + i * cell
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell - 4}" height="{cell - 4}" fill="{color}" '
                f'fill-opacity="{alpha:.2f}" stroke="#cbd5e0">'
                f"<title>{escape(src)} → {escape(dst)}: "
                f"{escape(fmt(v))}</title></rect>"
            )
            cls = "light" if alpha > 0.55 else ""
            parts.append(_text(x + (cell - 4) / 2, y + (cell - 4) / 2 + 5, fmt(v), "middle", cls))
    w, h = left + n * cell + 10, top_pad + n * cell + 10
    return f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}">{"".join(parts)}</svg>'
