"""Headless Chromium opens the dashboard, at demo scale and at production scale.

Chromium's console goes to stderr (`--enable-logging=stderr`), so an uncaught
script error shows there; the script marks `<body data-ready="1">` as its last
act, so the dumped DOM proves it ran to the end. What a reader sees is then
checked in the rendered text: money in ordinary currency format, the baseline
the savings are measured against, the note on too little traffic exactly when
it applies, and every topic and client named (at 1,000 topics and 10,000 client
ids, the top 15 and what the others carry). Laid out at the screenshot's width, no
table cell (a size, an amount, a client id) breaks over two lines. The screenshots are kept under
test-artifacts/ (dashboard-small.png, dashboard-large.png, dashboard-wide.png) for
a person to look at.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from zonegate.analytics.job import run_report
from zonegate.analytics.progress import Progress
from zonegate.analytics.source import locate
from zonegate.analytics.synthetic import SyntheticSpec, Truth, generate, write_local
from zonegate.analytics.tables import LEADER_RPCS
from zonegate.cost_model import price_table

pytestmark = pytest.mark.integration
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--window-size=1400,4200",
]
needs_chromium = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None, reason="chromium is not installed"
)
SCALES = {
    # A few minutes of a demo on a laptop: bytes in the hundreds, costs far below a cent.
    "small": SyntheticSpec(
        nodes_per_zone=1,
        topics=2,
        clients_per_zone=1,
        days=1,
        intervals_per_day=2,
        byte_scale=1 / 4096,
    ),
    # A month of a busy cluster: terabytes a day, costs in thousands of dollars.
    "large": SyntheticSpec(
        nodes_per_zone=2,
        topics=6,
        clients_per_zone=3,
        days=30,
        intervals_per_day=2,
        byte_scale=4000,
    ),
    # A day of a wide cluster: 1,000 topics, 10,000 client ids with zone tags as long
    # as real ones; each client uses one topic.
    "wide": SyntheticSpec(
        zones=("us-east-1a", "us-east-1b", "us-east-1c"),
        nodes_per_zone=2,
        topics=1000,
        clients_per_zone=3334,
        topics_per_client=1,
        days=1,
        intervals_per_day=2,
        byte_scale=40,
    ),
}
# What money looks like to a person: three significant figures ($12.3, $0.0000216,
# -$1.74k), $0, or the floor <$0.000001.
MONEY = re.compile(r"^(-?\$\d{1,3}(,\d{3})*(\.\d+)?[kMBT]?|\$0|<\$0\.000001|>-\$0\.000001)$")


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.iterdir()))}"
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.fixture(scope="module", params=sorted(SCALES))
def dashboard(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path, Truth]:
    scale = request.param
    root = tmp_path_factory.mktemp(f"store-{scale}")
    truth = Truth()
    write_local(generate(SCALES[scale], truth), root)
    out = root.parent / f"report-{scale}"
    with (root.parent / f"progress-{scale}.txt").open("w") as f:
        run_report(
            locate(root.as_uri()), out, price_table("aws", "us-east-1"), progress=Progress(5, f)
        )
    return scale, out / "dashboard.html", truth


def _text(dom: str) -> str:
    body = re.sub(r"<(script|style|svg)\b.*?</\1>", " ", dom, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def _section(dom: str, title: str) -> str:
    m = re.search(rf"<h2>{re.escape(title)}.*?</section>", dom, flags=re.S)
    assert m is not None, title
    return _text(m.group(0))


@needs_chromium
def test_dashboard_reads_right_at_any_scale(
    dashboard: tuple[str, Path, Truth], tmp_path: Path
) -> None:
    scale, page, truth = dashboard
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="1"' in dom.stdout
    assert dom.stdout.count("<svg") >= 6
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert not [c for c in console if "Uncaught" in c or "Error" in c], console

    text = _text(dom.stdout)
    # Money: every dollar amount a person reads (but the provider's unit prices, in
    # their own digits) is in ordinary currency format, three significant figures.
    amounts = re.findall(r"[-<>]*\$[^\s/)]*", text[: text.index("Prices used")])
    assert amounts
    bad = [a for a in amounts if not MONEY.match(a.rstrip(".,;"))]
    special = ("$0", "<$0.000001", ">-$0.000001")
    bad += [a for a in amounts if a.rstrip(".,;") not in special and _figures(a) != 3]
    assert not bad, bad
    assert not re.search(r"\d[eE][-+]?\d", text), re.search(r".{40}\d[eE][-+]?\d.{20}", text)
    # The baseline is stated; when the traffic is too small it says so, and drops the %.
    assert "Savings are measured against a baseline: Apache Kafka with three replicas" in text
    summary = _section(dom.stdout, "Summary")
    savings = _section(dom.stdout, "Cost against Apache Kafka")
    if (
        scale == "small"
    ):  # the banner's rule holds (docs/report.md), checked in test_dashboard_rules
        assert "Too little traffic for the savings to mean anything" in summary
        assert "%" not in summary and "n/a" in savings
    else:
        assert "Too little traffic" not in text
        m = re.search(r"saves vs the baseline \$\d+(\.\d+)?[kMBT]? \((\d+\.\d)%\)", summary)
        assert m is not None, summary
        assert f"{m.group(2)}%" in savings  # the card's percentage is the table's
    # Topics and clients are named; traffic about none is named for what it is.
    topics = _section(dom.stdout, "Traffic and cross-zone cost by topic")
    clients = _section(dom.stdout, "Traffic and cross-zone cost by client")
    for noun, section, by_bytes, crossed in (
        ("topics", topics, truth.bytes_by_topic, truth.cross_zone_by_topic),
        ("client ids", clients, truth.bytes_by_client, truth.cross_zone_by_client),
    ):
        # The tables show the 15 with the highest cross-zone cost, and say what the
        # others carry when there are more.
        ranked = sorted(by_bytes, key=lambda n: (-crossed.get(n, 0), -by_bytes[n], n))
        for name in ranked[:15]:
            if name != LEADER_RPCS or noun != "topics":
                assert name in section, name
        if len(ranked) > 15:
            assert f"The 15 of {len(ranked):,} {noun} with the highest cross-zone cost" in section
            assert f"the other {len(ranked) - 15:,} carry" in section
    if scale == "wide":
        assert len(truth.bytes_by_topic) > 1000 and len(truth.bytes_by_client) > 10_000
    assert "(none)" not in topics + clients

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"dashboard-{scale}.png"
    shot.unlink(missing_ok=True)
    taken = _chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    assert taken.returncode == 0 and shot.stat().st_size > 50_000, taken.stderr[-2000:]


# A page that loads the dashboard in a frame as wide as the screenshot and lists
# every table cell whose text Chromium laid out on more than one line.
CELLS = """<html><body style="margin:0"><iframe id="f" src="%s"
 style="border:0;width:1400px;height:4000px"></iframe><script>
document.getElementById("f").addEventListener("load", function () {
  var doc = this.contentDocument, broken = [];
  doc.querySelectorAll("td").forEach(function (cell) {
    var range = doc.createRange(), tops = {};
    range.selectNodeContents(cell);
    Array.prototype.forEach.call(range.getClientRects(), function (box) {
      if (box.height > 0) { tops[Math.round(box.top)] = 1; }
    });
    if (Object.keys(tops).length > 1) { broken.push(cell.textContent); }
  });
  document.body.setAttribute("data-cells", String(doc.querySelectorAll("td").length));
  document.body.setAttribute("data-broken", JSON.stringify(broken));
});
</script></body></html>"""


def _broken_cells(tmp: Path, page: Path) -> tuple[int, list[str]]:
    probe = tmp / "cells.html"
    probe.write_text(CELLS % page.as_uri())
    dom = _chromium(tmp, "--allow-file-access-from-files", "--dump-dom", probe.as_uri())
    m = re.search(r'<body[^>]*data-cells="(\d+)"[^>]*data-broken="([^"]*)"', dom.stdout)
    assert m is not None, dom.stdout[:500] + dom.stderr[-2000:]
    return int(m.group(1)), json.loads(html.unescape(m.group(2)))


@needs_chromium
def test_no_size_amount_or_name_breaks_over_two_lines(
    dashboard: tuple[str, Path, Truth], tmp_path: Path
) -> None:
    _, page, _ = dashboard
    cells, broken = _broken_cells(tmp_path, page)
    assert cells > 50 and not broken, broken


@needs_chromium
def test_a_broken_cell_would_be_caught(tmp_path: Path) -> None:
    page = tmp_path / "narrow.html"
    page.write_text(
        '<table style="width:60px"><tr><td>svc-1 zonegate_az=us-east-1a</td>'
        "<td>85.5 GiB</td></tr></table>"
    )
    assert _broken_cells(tmp_path, page) == (2, ["svc-1 zonegate_az=us-east-1a", "85.5 GiB"])


def _figures(amount: str) -> int:
    digits = re.sub(r"[^\d]", "", amount).lstrip("0")
    return len(digits)


@needs_chromium
def test_a_broken_script_would_be_caught(tmp_path: Path) -> None:
    # The check above must be able to fail: a page whose script throws is seen.
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert any("Uncaught" in line for line in dom.stderr.splitlines()), dom.stderr[-2000:]
    assert 'data-ready="1"' not in dom.stdout


@pytest.mark.unit
def test_the_money_check_would_catch_scientific_notation() -> None:
    assert not MONEY.match("$2.16e-05")
    assert MONEY.match("$2.63k") and MONEY.match("-$0.0000203") and MONEY.match("$0")
    assert _figures("$2,632.50") == 6 and _figures("-$0.0000203") == 3
