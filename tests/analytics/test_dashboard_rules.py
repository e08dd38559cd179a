"""The dashboard's rules, checked on the page it renders: one precision for money in
cards, tables and axes; one colour per meaning on every chart; a day of data drawn as
bars, not dots; the "too little traffic" banner exactly when its rule holds."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from zonegate.analytics import dashboard
from zonegate.analytics.job import run_report
from zonegate.analytics.money import usd
from zonegate.analytics.progress import Progress
from zonegate.analytics.source import locate
from zonegate.analytics.synthetic import SyntheticSpec, generate, write_local
from zonegate.cost_model import price_table

from .test_money import figures

pytestmark = pytest.mark.unit
AWS = price_table("aws", "us-east-1")
DEMO = SyntheticSpec(
    nodes_per_zone=1, topics=2, clients_per_zone=1, days=1, intervals_per_day=2, byte_scale=1 / 4096
)
MONTH = SyntheticSpec(
    nodes_per_zone=2, topics=6, clients_per_zone=3, days=30, intervals_per_day=2, byte_scale=4000
)
BANNER = "Too little traffic for the savings to mean anything"


def _data(spec: SyntheticSpec, tmp: Path) -> dashboard.DashboardData:
    root = tmp / "store"
    write_local(generate(spec), root)
    with (tmp / "progress.txt").open("w") as f:
        t = run_report(locate(root.as_uri()), tmp / "out", AWS, progress=Progress(5, f)).tables
    zones = sorted({str(r["zone"]) for r in t["cost_by_zone"]})
    return dashboard.DashboardData(
        usage_url=root.as_uri(),
        generated_at="now",
        prices=AWS,
        storage_class="standard",
        records=1,
        objects=1,
        zones=zones,
        matrix=t["matrix"],
        by_topic=t["cost_by_topic"],
        by_client=t["cost_by_client"],
        by_zone=t["cost_by_zone"],
        daily=t["daily"],
        savings=t["savings"],
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dashboard.DashboardData:
    return _data(DEMO, tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> dashboard.DashboardData:
    return _data(MONTH, tmp_path_factory.mktemp("month"))


def _amounts(page: str) -> list[str]:
    """Every dollar amount on the page but the provider's unit prices (their own digits)."""
    page = page[: page.index("<h2>Prices used")]
    text = unescape(re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S))
    return re.findall(r"[<>]?-?\$[\d.,]+[kMBT]?", re.sub(r"<[^>]+>", " ", text))


@pytest.mark.parametrize("scale", ["demo", "month"])
def test_money_has_three_figures_in_cards_tables_and_axes(
    scale: str, request: pytest.FixtureRequest
) -> None:
    d: dashboard.DashboardData = request.getfixturevalue(scale)
    page = dashboard.render(d)
    amounts = [a.rstrip(".,") for a in _amounts(page)]
    assert len(amounts) > 50
    odd = [a for a in amounts if a not in ("$0", "<$0.000001", ">-$0.000001") and figures(a) != 3]
    assert not odd, odd
    axis = re.findall(r'class="axis">(-?\$[^<]+)</text>', page)  # chart axes too
    assert axis and all(a == "$0" or figures(a) == 3 for a in axis), axis
    # One amount reads the same in the card, the table and on the chart.
    total = usd(d.savings[0]["total_usd"])
    kpi = re.search(r"zonegate cost \(measured\)<b>([^<]+)</b>", page)
    assert kpi is not None and kpi.group(1) == total
    assert f'data-v="{float(d.savings[0]["total_usd"])!r}">{total}</td>' in page
    assert f'class="total">{total}</text>' in page


def _colours(page: str) -> dict[str, set[str]]:
    """meaning -> the colours its marks are drawn in, over every chart on the page."""
    seen: dict[str, set[str]] = defaultdict(set)
    for tag in re.findall(r"<(?:rect|polyline|circle|line|path)\b[^>]*>", page):
        paint = re.search(r'(?:fill|stroke)="(#[0-9a-fA-F]{6})"', tag)
        if paint is None:
            continue
        meaning = re.search(r'data-meaning="([^"]+)"', tag)
        assert meaning is not None, f"a coloured mark that says not what it means: {tag}"
        seen[meaning.group(1)].add(paint.group(1).lower())
    return seen


def test_one_colour_per_meaning_across_charts(demo: Any, month: Any) -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    for d in (demo, month):
        for meaning, paints in _colours(dashboard.render(d)).items():
            seen[meaning] |= paints
    # Cross-zone bytes (heatmap, topic and client bars) and their cost (line items).
    assert {"cross_zone", "same_zone", "s3_put", "zonegate", "kafka"} <= set(seen)
    assert all(len(p) == 1 for p in seen.values()), seen
    by_colour: dict[str, list[str]] = defaultdict(list)
    for meaning, paints in seen.items():
        by_colour[next(iter(paints))].append(meaning)
    assert all(len(m) == 1 for m in by_colour.values()), by_colour


def test_the_colour_check_can_fail() -> None:
    two = '<rect fill="#c53030" data-meaning="a"/><rect fill="#c53030" data-meaning="b"/>'
    with pytest.raises(AssertionError):
        _colours('<rect fill="#c53030"/>')
    assert _colours(two) == {"a": {"#c53030"}, "b": {"#c53030"}}


def _daily_chart(page: str) -> str:
    m = re.search(r"<h2>Daily cost.*?(<svg.*?</svg>)", page, flags=re.S)
    assert m is not None
    return m.group(1)


def test_a_day_is_bars_and_a_month_is_lines(demo: Any, month: Any) -> None:
    day = _daily_chart(dashboard.render(demo))
    assert "<polyline" not in day and "<circle" not in day
    bars = re.findall(r'<rect [^>]*height="([\d.]+)"[^>]*data-meaning="zonegate"', day)
    assert len(bars) == 2  # the bar and its legend swatch
    assert max(float(h) for h in bars) > 100  # the tallest amount fills the plot
    assert usd(demo.daily[0]["total_usd"]) in day  # a bar says its amount
    lines = _daily_chart(dashboard.render(month))
    assert lines.count("<polyline") == 3


def _with_costs(d: Any, kafka: float, requests: float, zonegate: float) -> Any:
    zg, kf, fff = (dict(r) for r in d.savings)
    zg.update(s3_put_usd=requests, s3_get_usd=0.0, total_usd=zonegate)
    kf.update(total_usd=kafka)
    return dataclasses.replace(d, savings=[zg, kf, fff])


@pytest.mark.parametrize(
    ("kafka", "requests", "zonegate", "banner"),
    [
        (0.5, 0.8, 1.0, True),  # baseline under $1 and zonegate's cost mostly requests
        (0.999, 0.51, 1.0, True),
        (1.0, 0.8, 1.0, False),  # a baseline of $1 or more: savings are stated
        (0.5, 0.5, 1.0, False),  # requests not more than half: both sides grow with bytes
        (0.5, 0.0, 0.0, False),  # nothing measured
        (250.0, 0.8, 1.0, False),
    ],
)
def test_the_banner_shows_exactly_when_its_rule_holds(
    month: Any, kafka: float, requests: float, zonegate: float, banner: bool
) -> None:
    d = _with_costs(month, kafka, requests, zonegate)
    page = dashboard.render(d)
    assert dashboard.too_little_traffic(d.savings) is banner
    assert (BANNER in page) is banner
    summary = page[page.index("<h2>Summary") : page.index("<h2>Cost against")]
    assert ("%)" not in summary) is banner  # the percentages are left out with it


def test_the_demo_shows_the_banner_and_the_month_does_not(demo: Any, month: Any) -> None:
    assert BANNER in dashboard.render(demo)
    assert BANNER not in dashboard.render(month)
