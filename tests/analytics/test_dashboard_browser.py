"""Headless Chromium opens the dashboard: it renders, its script runs without errors.

Chromium's console goes to stderr (`--enable-logging=stderr`), so an uncaught
script error shows there; the script marks `<body data-ready="1">` as its last
act, so the dumped DOM proves it ran to the end. The screenshot is kept under
test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

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
    "--window-size=1400,2600",
]


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.iterdir()))}"
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="chromium is not installed")
def test_dashboard_renders_without_script_errors(report: object, tmp_path: Path) -> None:
    _, _, out = report  # type: ignore[misc]
    page = (out / "dashboard.html").as_uri()
    dom = _chromium(tmp_path, "--dump-dom", page)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="1"' in dom.stdout
    assert dom.stdout.count("<svg") >= 6
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert not [c for c in console if "Uncaught" in c or "Error" in c], console
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "dashboard.png"
    shot.unlink(missing_ok=True)
    taken = _chromium(tmp_path, f"--screenshot={shot}", page)
    assert taken.returncode == 0 and shot.stat().st_size > 50_000, taken.stderr[-2000:]


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="chromium is not installed")
def test_a_broken_script_would_be_caught(tmp_path: Path) -> None:
    # The check above must be able to fail: a page whose script throws is seen.
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert any("Uncaught" in line for line in dom.stderr.splitlines()), dom.stderr[-2000:]
    assert 'data-ready="1"' not in dom.stdout
