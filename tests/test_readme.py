"""The README, executed: every command in it runs, in order, against a fresh data directory.

The commands are the README's ```sh blocks, in order. An HTML comment just
before a block (not shown on the rendered page) says how to run it:

- `<!-- readme-test: skip (why) -->`: not run (installing, the suite itself);
- `<!-- readme-test: background until N lines "TEXT" -->`: started, as in a
  terminal of its own, and left running once its stdout has shown TEXT N times;
- `<!-- readme-test: interrupt ... -->` (on its own): Ctrl-C to the background
  command, which must then exit with status 0.

Every other block runs in one bash session, as typed into one terminal (`cd`,
variables and `&` jobs carry over), under `set -e -o pipefail`: the block
must succeed. The directory is new and holds a link to the repository's
`benchmarks/`; the README's own install line makes its `.venv` there (the
clone's pinned versions, constraints.txt), so a package the README forgets to
install fails the test. Ports: every
`127.0.0.1:PORT` and `--http-port PORT` in the commands, and `zonegate
serve`'s default 9092, move to free ports, keeping their distances, so the
test can run beside other servers. What ran and what it printed is kept in
test-artifacts/readme-transcript.txt.
"""

from __future__ import annotations

import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
DIRECTIVE = re.compile(r"<!-- readme-test: (.*?) -->")
BACKGROUND = re.compile(r'background until (\d+) lines? "([^"]+)"')
PORT = re.compile(r"(?<=127\.0\.0\.1:)\d{4,5}\b|(?<=--http-port )\d{4,5}\b")
SERVE_DEFAULT_PORT = 9092
STEP_TIMEOUT_S = 300


@dataclass
class Step:
    kind: str  # run, skip, background, interrupt
    code: str
    directive: str
    line: int


def readme_steps(text: str) -> list[Step]:
    lines = text.splitlines()
    steps: list[Step] = []
    pending: tuple[str, int] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = DIRECTIVE.fullmatch(line.strip())
        if m is not None:
            assert pending is None, f"README:{pending and pending[1]}: directive without a block"
            if m.group(1).startswith("interrupt"):
                steps.append(Step("interrupt", "", m.group(1), i + 1))
            else:
                pending = (m.group(1), i + 1)
        elif line.startswith("```sh"):
            end = lines.index("```", i + 1)
            code = "\n".join(lines[i + 1 : end])
            directive = pending[0] if pending else ""
            kind = directive.split(" ", 1)[0] if directive else "run"
            assert kind in ("run", "skip", "background"), f"README:{i + 1}: {directive!r}"
            steps.append(Step(kind, code, directive, i + 1))
            pending = None
            i = end
        elif line.strip() and pending is not None:
            raise AssertionError(f"README:{pending[1]}: {pending[0]!r} is not right before a block")
        i += 1
    return steps


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_map(codes: list[str]) -> dict[int, int]:
    """Each group of nearby ports the README uses, moved to a free group at the same distances."""
    # serve's defaults: its Kafka ports and its /metrics ports (Kafka's + 100), all
    # moved, whether or not the README names each.
    serve = {SERVE_DEFAULT_PORT + i + http for i in range(3) for http in (0, 100)}
    used = sorted({int(m.group()) for c in codes for m in PORT.finditer(c)} | serve)
    groups: list[list[int]] = []
    for p in used:
        if groups and p - groups[-1][-1] <= 10:
            groups[-1].append(p)
        else:
            groups.append([p])
    mapping: dict[int, int] = {}
    for g in groups:
        for _ in range(200):
            # Below Linux's ephemeral range (32768-60999): a client's outgoing port cannot
            # take one between this check and the node's bind.
            base = random.randrange(20_000, 32_000)
            moved = {p: base + p - g[0] for p in range(g[0], g[-1] + 1)}
            if all(_free(q) for q in moved.values()) and not set(moved.values()) & set(
                mapping.values()
            ):
                mapping.update(moved)
                break
        else:
            raise RuntimeError(f"no free ports for {g}")
    return mapping


def localize(code: str, ports: dict[int, int]) -> str:
    code = PORT.sub(lambda m: str(ports[int(m.group())]), code)
    # The README is read in a clone; the test's directory is not one: install the
    # clone the suite runs from.
    code = re.sub(r"\bpip install -e \.(?=\s|$)", f"pip install -q -e {ROOT}", code)
    listen = f"127.0.0.1:{ports[SERVE_DEFAULT_PORT]}"
    # serve's /metrics is on its Kafka port + 100 (9192 for 9092), which the README's
    # curl names: both move with the same map.
    http = ports.get(SERVE_DEFAULT_PORT + 100)
    extra = f" --http-port {http}" if http is not None else ""
    return re.sub(
        r"\bzonegate serve\b(?![^\n]*--listen)", f"zonegate serve --listen {listen}{extra}", code
    )


class Lines:
    """A process's output, line by line, read on a thread so waits can time out."""

    def __init__(self, stream: IO[str], transcript: IO[str]) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()
        self._transcript = transcript
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._transcript.write(line)
            self._transcript.flush()
            self.q.put(line)
        self.q.put(None)

    def until(self, done: re.Pattern[str], timeout: float) -> tuple[str, list[str]]:
        """Lines up to the first matching one; ("", lines) at EOF; TimeoutError past timeout."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError("".join(seen[-40:])) from None
            if line is None:
                return "", seen
            if done.search(line):
                return line, seen
            seen.append(line)


@pytest.fixture
def readme_dir(tmp_path: Path) -> Path:
    here = tmp_path / "zonegate"
    here.mkdir()
    (here / "benchmarks").symlink_to(ROOT / "benchmarks")
    return here


def _env(readme_dir: Path) -> dict[str, str]:
    """A terminal's environment: no virtual environment active (the README makes its
    own, `.venv`, with its install line, and activates it), the pinned versions of the
    packages that line installs (PIP_CONSTRAINT), and `python3` the interpreter the
    suite runs on, without its packages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZONEGATE_", "VIRTUAL_ENV"))}
    test_bin = str(Path(sys.executable).parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != test_bin]
    base_bin = str(Path(sys.base_prefix) / "bin")
    env["PATH"] = os.pathsep.join([str(readme_dir / ".venv" / "bin"), base_bin, *path])
    env["PIP_CONSTRAINT"] = str(ROOT / "constraints.txt")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture
def transcript() -> Iterator[IO[str]]:
    ARTIFACTS.mkdir(exist_ok=True)
    with (ARTIFACTS / "readme-transcript.txt").open("w") as f:
        yield f


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_every_readme_command_runs_in_order(readme_dir: Path, transcript: IO[str]) -> None:
    steps = readme_steps((ROOT / "README.md").read_text())
    kinds = [s.kind for s in steps]
    assert "background" in kinds and "interrupt" in kinds and kinds.count("run") >= 5
    ports = port_map([s.code for s in steps])
    env = _env(readme_dir)
    session = subprocess.Popen(
        ["bash", "--norc", "--noprofile"],
        cwd=readme_dir,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert session.stdin is not None and session.stdout is not None
    out = Lines(session.stdout, transcript)
    session.stdin.write("set -e -o pipefail\n")
    background: subprocess.Popen[str] | None = None
    try:
        for n, step in enumerate(steps):
            where = f"README.md line {step.line}"
            transcript.write(f"\n### {where}: {step.kind} {step.directive}\n{step.code}\n###\n")
            transcript.flush()
            code = localize(step.code, ports)
            if step.kind == "skip":
                continue
            if step.kind == "background":
                m = BACKGROUND.fullmatch(step.directive)
                assert m is not None, where
                background = subprocess.Popen(
                    ["bash", "-c", f"exec {code}"],
                    cwd=readme_dir,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=(readme_dir / "background.log").open("w"),
                    text=True,
                    start_new_session=True,
                )
                assert background.stdout is not None
                bg_out = Lines(background.stdout, transcript)
                for _ in range(int(m.group(1))):
                    line, _ = bg_out.until(re.compile(re.escape(m.group(2))), STEP_TIMEOUT_S)
                    log = (readme_dir / "background.log").read_text()[-3000:]
                    assert line, f"{where}: the background command ended:\n{log}"
                continue
            if step.kind == "interrupt":
                assert background is not None, f"{where}: nothing runs in the background"
                # A person takes a moment to reach the server's terminal. A Ctrl-C within a
                # fetch's max wait (0.5 s) of a consumer's exit can still log a traceback
                # from the fetch it left pending: a shutdown race in the proxy, reported
                # apart from the README.
                time.sleep(2)
                os.killpg(background.pid, signal.SIGINT)  # what Ctrl-C in its terminal sends
                status = background.wait(60)
                log = (readme_dir / "background.log").read_text()
                transcript.write(f"--- the background command's stderr ---\n{log}---\n")
                assert status == 0, f"{where}: exit status {status}:\n{log[-3000:]}"
                assert "Traceback" not in log, log[-3000:]
                background = None
                continue
            script = readme_dir / f".readme-step-{n}.sh"
            script.write_text(code + "\n")
            session.stdin.write(f"source {script.name}\necho '__step {n} done__'\n")
            session.stdin.flush()
            try:
                line, seen = out.until(re.compile(rf"^__step {n} done__$"), STEP_TIMEOUT_S)
            except TimeoutError as exc:
                raise AssertionError(f"{where} did not finish:\n{step.code}\n{exc}") from None
            output = "".join(seen)
            if not line:
                logs = "".join(
                    f"--- {log.relative_to(readme_dir)} ---\n{log.read_text()[-3000:]}\n"
                    for log in sorted(readme_dir.rglob("*.log"))
                )
                transcript.write(logs)
                status = session.wait(10)
                raise AssertionError(f"{where} failed ({status}):\n{step.code}\n{output}\n{logs}")
            assert "Traceback" not in output, f"{where}:\n{output}"
    finally:
        # The whole process group, even when its leader has ended: nodes a failed step
        # started with `&` in the session outlive the `set -e` shell that exits.
        for proc in (background, session):
            if proc is not None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)
    assert (readme_dir / "report" / "dashboard.html").exists()
    assert list((readme_dir / "zonegate-data" / "objects" / "usage").rglob("*.parquet"))


@pytest.mark.integration  # binds loopback ports to find free ones
def test_the_readme_is_read_as_intended() -> None:
    steps = readme_steps((ROOT / "README.md").read_text())
    codes = [s.code for s in steps]
    # The two commands, and the ones the newcomer must see run.
    assert any(c.strip() == "zonegate serve" for c in codes)
    assert any(c.strip() == "scripts/test" for c in codes)
    for words in ("zonegate report", "zonegate cost", "zonegate node", "benchmarks/produce.py"):
        assert any(words in s.code for s in steps if s.kind == "run"), words
    ports = port_map(codes)
    localized = "\n".join(localize(c, ports) for c in codes)
    assert not re.search(r"127\.0\.0\.1:(909\d|19\d\d\d)\b", localized)
    assert f"zonegate serve --listen 127.0.0.1:{ports[9092]}" in localized


@pytest.mark.unit
def test_a_misplaced_directive_is_refused() -> None:
    with pytest.raises(AssertionError, match="is not right before a block"):
        readme_steps("<!-- readme-test: skip (x) -->\nsome text\n```sh\nls\n```\n")
