"""Inline SVG charts for the dashboard: drawn here, in Python, so the page needs no library.

Each function returns one `<svg>` string; hovering a mark shows its exact value
(an SVG `<title>`), so the charts stay readable with no script at all. Every
coloured mark names its meaning (`data-meaning`) and takes its colour from
`COLOURS`, so one meaning has one colour on every chart and no colour means
two things.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from zonegate.analytics.money import axis_ticks

Fmt = Callable[[float], str]

# One colour per meaning, on every chart. Red and green keep the heatmap's sense
# everywhere: red crosses zones (billed), green stays inside one (free).
COLOURS = {
    "cross_zone": "#c53030",  # bytes that cross zones, and the transfer they cost
    "same_zone": "#38a169",  # bytes that stay inside a zone
    "s3_put": "#2b6cb0",
    "s3_get": "#63b3ed",
    "s3_storage": "#805ad5",
    "block_storage": "#b7791f",
    "zonegate": "#dd6b20",  # the scenarios compared day by day
    "kafka": "#1a202c",
    "kafka_fff": "#a0aec0",
}
# A label longer than this is cut in the middle: a client id's zone tag is at its end.
LABEL_CHARS = 28


def colour(meaning: str) -> str:
    """The colour of `meaning`; a new meaning must be given its own in `COLOURS`."""
    return COLOURS[meaning]


def short(label: str, limit: int = LABEL_CHARS) -> str:
    """`label` cut in the middle to `limit` characters, keeping its start and its end."""
    if len(label) <= limit:
        return label
    head = (limit - 1) // 2
    return label[:head] + "…" + label[len(label) - (limit - 1 - head) :]


def size(x: float) -> str:
    for unit, div in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(x) >= div:
            return f"{x / div:,.1f} {unit}"
    return f"{x:,.0f} B"


def _svg(w: float, h: float, parts: Sequence[str]) -> str:
    box = f'viewBox="0 0 {w:.0f} {h:.0f}" width="{w:.0f}" height="{h:.0f}"'
    return f"<svg {box}>{''.join(parts)}</svg>"


def _text(x: float, y: float, s: str, anchor: str = "start", cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}>{escape(s)}</text>'


def _rect(x: float, y: float, w: float, h: float, meaning: str, title: str = "") -> str:
    tip = f"<title>{escape(title)}</title>" if title else ""
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
        f'fill="{colour(meaning)}" data-meaning="{meaning}">{tip}</rect>'
    )


def _legend(x: float, y: float, items: Sequence[tuple[str, str]]) -> tuple[list[str], float]:
    """Swatches with their names in a row from (x, y); returns the parts and the end x."""
    parts = []
    for meaning, name in items:
        parts.append(_rect(x, y, 12, 12, meaning))
        parts.append(_text(x + 16, y + 11, name))
        x += 28 + 7 * len(name)
    return parts, x


def traffic_bars(items: Sequence[tuple[str, float, float]], fmt: Fmt, *, width: int = 560) -> str:
    """One bar per (label, all bytes, cross-zone bytes), largest first as given: the part
    that stayed in its zone green, the part that crossed red, the total at the end."""
    if not items:
        return '<p class="empty">nothing to show</p>'
    label_w, row_h = 200, 26
    top = max(v for _, v, _ in items) or 1.0
    plot = width - label_w - 80
    parts = []
    for i, (label, total, crossed) in enumerate(items):
        y = i * row_h
        x = float(label_w)
        for meaning, v, what in (
            ("same_zone", total - crossed, "stayed in its zone"),
            ("cross_zone", crossed, "crossed zones"),
        ):
            w = plot * v / top
            if v > 0:
                w = max(w, 1.0)  # a sliver that exists is drawn
                parts.append(_rect(x, y + 5, w, row_h - 10, meaning, f"{label}: {fmt(v)} {what}"))
                x += w
        parts.append(_text(label_w - 8, y + 17, short(label), "end"))
        parts.append(_text(x + 6, y + 17, fmt(total)))
    legend, _ = _legend(
        label_w, len(items) * row_h + 6, (("same_zone", "in zone"), ("cross_zone", "cross-zone"))
    )
    return _svg(width, len(items) * row_h + 26, parts + legend)


def stacked_hbars(
    rows: Sequence[tuple[str, Sequence[float]]],
    legend: Sequence[tuple[str, str]],
    fmt: Fmt,
    *,
    width: int = 720,
) -> str:
    """One bar per row, split into the (meaning, name) parts of `legend`; total at the end."""
    label_w, row_h = 260, 34
    top = max((sum(p) for _, p in rows), default=0.0) or 1.0
    plot = width - label_w - 90
    parts = []
    for i, (label, values) in enumerate(rows):
        y = i * row_h
        x = float(label_w)
        parts.append(_text(label_w - 8, y + 21, short(label, 40), "end"))
        for (meaning, name), v in zip(legend, values, strict=True):
            w = plot * v / top
            if w > 0:
                parts.append(_rect(x, y + 6, w, row_h - 12, meaning, f"{label} — {name}: {fmt(v)}"))
            x += w
        parts.append(_text(x + 6, y + 21, fmt(sum(values)), cls="total"))
    swatches, end = _legend(label_w, len(rows) * row_h + 8, legend)
    return _svg(max(width, end + 10), len(rows) * row_h + 30, parts + swatches)


def _y_axis(
    top: float, fmt: Fmt, left: float, right: float, pad: float, plot_h: float
) -> tuple[list[str], Callable[[float], float]]:
    ticks = axis_ticks(top)
    high = ticks[-1] or 1.0

    def py(v: float) -> float:
        return pad + plot_h * (1 - v / high)

    parts = []
    for v in ticks:
        y = py(v)
        parts.append(f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(_text(left - 6, y + 4, fmt(v), "end", "axis"))
    return parts, py


def daily(
    xs: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float]]],
    fmt: Fmt,
    *,
    width: int = 960,
    bars_up_to: int = 14,
) -> str:
    """The (meaning, name, values) series over the days `xs`: side-by-side bars per day
    while the days are few (a day or a week reads as amounts to compare, and a line
    through one point is a dot), a line per series over more days (a trend)."""
    if not xs:
        return '<p class="empty">nothing to show</p>'
    left, right, pad, height = 84, 20, 12, 250
    plot_w, plot_h = width - left - right, height - 60
    top = max((max(v, default=0.0) for _, _, v in series), default=0.0)
    parts, py = _y_axis(top, fmt, left, width - right, pad, plot_h)
    base = py(0.0)
    slot = plot_w / len(xs)
    every = max(1, -(-len(xs) * 80 // int(plot_w)))  # a date label is ~70 px wide
    for i, x in enumerate(xs):
        if i % every == 0:
            parts.append(_text(left + slot * (i + 0.5), base + 16, x, "middle", "axis"))
    if len(xs) <= bars_up_to:
        bar = min(90.0, slot * 0.8 / len(series))
        for i, day in enumerate(xs):
            x0 = left + slot * (i + 0.5) - bar * len(series) / 2
            for j, (meaning, name, values) in enumerate(series):
                v = values[i]
                y = py(v)
                parts.append(
                    _rect(x0 + j * bar, y, bar - 2, base - y, meaning, f"{name} {day}: {fmt(v)}")
                )
                if bar >= 80:  # bars wide enough to say their amount above them
                    parts.append(_text(x0 + (j + 0.5) * bar - 1, y - 4, fmt(v), "middle"))
    else:
        for meaning, name, values in series:
            pts = " ".join(
                f"{left + slot * (i + 0.5):.1f},{py(v):.1f}" for i, v in enumerate(values)
            )
            parts.append(
                f'<polyline points="{pts}" fill="none" stroke="{colour(meaning)}" '
                f'stroke-width="2.5" data-meaning="{meaning}"><title>{escape(name)}</title>'
                "</polyline>"
            )
            for i, v in enumerate(values):  # invisible marks, to hover for the amount
                parts.append(
                    f'<circle cx="{left + slot * (i + 0.5):.1f}" cy="{py(v):.1f}" r="5" '
                    f'fill-opacity="0"><title>{escape(name)} {escape(xs[i])}: '
                    f"{escape(fmt(v))}</title></circle>"
                )
    legend, _ = _legend(left, height - 16, [(m, n) for m, n, _ in series])
    return _svg(width, height, parts + legend)


def heatmap(zones: Sequence[str], cells: dict[tuple[str, str], float], fmt: Fmt) -> str:
    """From-zone rows, to-zone columns; darker is more bytes. The diagonal stays in its zone."""
    n = len(zones)
    cell, top_pad = 110, 40
    left = 24 + 7 * max((len(z) for z in zones), default=4)  # room for "us-east-1a →"
    top = max(cells.values(), default=0.0) or 1.0
    parts = [_text(left + n * cell / 2, 14, "to zone →", "middle", "axis")]
    for j, z in enumerate(zones):
        parts.append(_text(left + j * cell + cell / 2, top_pad - 8, short(z, 16), "middle"))
    for i, src in enumerate(zones):
        parts.append(_text(left - 8, top_pad + i * cell + cell / 2 + 4, f"{src} →", "end"))
        for j, dst in enumerate(zones):
            v = cells.get((src, dst), 0.0)
            alpha = 0.08 + 0.92 * (v / top) if v > 0 else 0.0
            meaning = "same_zone" if src == dst else "cross_zone"
            x, y = left + j * cell, top_pad + i * cell
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell - 4}" height="{cell - 4}" '
                f'fill="{colour(meaning)}" data-meaning="{meaning}" '
                f'fill-opacity="{alpha:.2f}" stroke="#cbd5e0">'
                f"<title>{escape(src)} → {escape(dst)}: "
                f"{escape(fmt(v))}</title></rect>"
            )
            cls = "light" if alpha > 0.55 else ""
            parts.append(_text(x + (cell - 4) / 2, y + (cell - 4) / 2 + 5, fmt(v), "middle", cls))
    return _svg(left + n * cell + 10, top_pad + n * cell + 10, parts)
