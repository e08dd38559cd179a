"""Starts real zonegate nodes as separate processes on free ports, and always stops them."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunningNode:
    data_dir: Path
    args: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[str] | None = None
    port: int = 0
    starts: int = field(default=0)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> RunningNode:
        self.starts += 1
        log = open(self.log_path, "a")  # noqa: SIM115 - kept open for the child's life
        log.write(f"--- start {self.starts} ---\n")
        log.flush()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "zonegate",
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--data-dir",
                str(self.data_dir),
                # serve's default /metrics port is the Kafka port + 100, which another
                # test's block may hold: any free port instead, unless the test names one.
                *([] if "--http-port" in self.args else ["--http-port", "0"]),
                *self.args,
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, **self.env},
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("zonegate listening on"):
                # "zonegate listening on HOST:PORT (node N, zone Z)"; the first is zone 0.
                self.port = int(line.split()[3].rsplit(":", 1)[1])
                return self
        self.proc.kill()
        raise RuntimeError(f"node did not start; log:\n{self.log_path.read_text()[-4000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill9(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> RunningNode:
        """Starts again on the same port, so clients that knew the node find it again."""
        return self.start(self.port)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text()


def _port_range() -> tuple[int, int]:
    """20000-30000, split between pytest-xdist's workers (gw0, gw1, ...): a block one
    worker found free is not taken by another before its node binds it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count <= 1:
        return 20000, 30000
    width = 10000 // count
    low = 20000 + int(worker[2:]) * width
    return low, low + width


def free_port_block(count: int = 3) -> int:
    """A base port with `count` free ports after it, below the kernel's ephemeral range.

    `zonegate serve` puts zone i on base + i and a restart reuses them; ports
    outside the ephemeral range cannot be taken meanwhile by a client socket.
    """
    low, high = _port_range()
    for _ in range(200):
        base = random.randrange(low, high - count)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free block of ports")


def start_node(
    data_dir: Path, args: Sequence[str] = (), env: dict[str, str] | None = None
) -> RunningNode:
    data_dir.mkdir(parents=True, exist_ok=True)
    node = RunningNode(data_dir, list(args), dict(env or {}), data_dir / "node.log")
    return node.start(free_port_block())
