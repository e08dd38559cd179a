"""`zonegate report` as a user runs it: a few log lines, a readable report, one-line errors.

The command runs in a child process with stderr to a pipe (not a terminal), as
in CI or `2> report.log`: progress must then be a handful of lines, never a
redrawn bar. On a terminal the same steps are one live line (`Progress`).
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from zonegate.analytics.progress import Progress
from zonegate.analytics.synthetic import SyntheticSpec, generate, write_local

SPEC = SyntheticSpec(days=1, intervals_per_day=2, topics=2, clients_per_zone=1)


def _report(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    return subprocess.run(
        [sys.executable, "-m", "zonegate", "report", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    write_local(generate(SPEC), tmp_path / "store")
    return tmp_path / "store"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.integration
@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_a_few_log_lines_and_a_report_the_user_can_read(
    engine: str, store: Path, tmp_path: Path
) -> None:
    done = _report(tmp_path, "--usage", store.as_uri(), "--out", "report", "--engine", engine)
    assert done.returncode == 0, done.stderr[-3000:]
    ours = [line for line in done.stderr.splitlines() if line.startswith(("[", "done:"))]
    assert [line[:5] for line in ours] == ["[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]", "done:"]
    assert "\r" not in done.stderr and "[Stage" not in done.stderr, done.stderr[-2000:]
    # Spark binds the loopback address in local mode instead of warning that the host
    # name resolves to it and then binding whatever interface it finds.
    assert "loopback address" not in done.stderr and "SPARK_LOCAL_IP" not in done.stderr
    # The JVM's own notice and Spark's REPL banner may remain; nothing else of Spark's.
    assert len(done.stderr.splitlines()) <= len(ours) + 3, done.stderr
    out = tmp_path / "report"
    want = 0o777 & ~_umask()
    assert stat.S_IMODE(out.stat().st_mode) == want
    for path in out.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o444 == 0o444 & want, path  # readable by whoever may read the user's
    assert "(open report/dashboard.html)" in done.stdout


@pytest.mark.integration
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--usage", "ftp://host/usage"], "unsupported usage URL 'ftp://host/usage'"),
        (["--usage", "file:///nonexistent/zonegate"], "no usage records"),
        (["--s3-endpoint", "minio:9000"], "--s3-endpoint 'minio:9000' is not an http://"),
        (["--out", "a-file/report"], "cannot write the report to a-file/report"),
        (["--engine", "arrow", "--master", "local[2]"], "--master is for the Spark engine"),
        (["--provider", "ibm"], "unknown provider 'ibm'"),
    ],
)
def test_bad_input_is_one_line(store: Path, tmp_path: Path, args: list[str], words: str) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    base = {"--usage": store.as_uri(), "--out": "report"}
    for i in range(0, len(args), 2):
        base.pop(args[i], None)
    argv = [x for kv in base.items() for x in kv] + args
    done = _report(tmp_path, *argv)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert words in done.stderr and "(no report was written)" in done.stderr, done.stderr
    assert not (tmp_path / "report").exists()


@pytest.mark.unit
def test_progress_is_lines_off_a_terminal_and_one_live_line_on_one() -> None:
    logged = io.StringIO()
    p = Progress(2, logged, live=False)
    p.step("reading")
    p.update("1,000 records summed")  # not logged: it would flood a file
    p.step("writing")
    p.done("report")
    lines = logged.getvalue().splitlines()
    assert [line[:5] for line in lines] == ["[1/2]", "[2/2]", "done:"]
    assert "\r" not in logged.getvalue() and "1,000" not in logged.getvalue()

    shown = io.StringIO()
    p = Progress(2, shown, live=True)
    p.step("reading")
    p.update("1,000 records summed")
    p.step("writing")
    p.done("report")
    text = shown.getvalue()
    assert text.count("\r") >= 4 and "1,000 records summed" in text
    assert text.count("\n") == 2 and text.endswith("\n")  # the finished bar, then "done:"


@pytest.mark.unit
def test_progress_is_live_exactly_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert Progress(5, Tty()).live
    assert not Progress(5, io.StringIO()).live


@pytest.mark.integration
def test_local_spark_binds_the_loopback_address(spark: Any) -> None:
    # Left alone, Spark takes the host name's address, finds it is loopback, warns, and
    # binds the first other interface it finds: a local report then listens on the LAN.
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
