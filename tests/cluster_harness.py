"""A cluster of `zonegate node` processes sharing one SQLite metadata store and object store.

Each node is a separate process on free ports, with its /metrics endpoint, so a
test reads the nodes' own accounting the way an operator would.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

_LINE = re.compile(r"zonegate listening on [^:]+:(\d+) \(node (\d+), zone ([^,)]+), http (\d+)\)")


@dataclass
class ClusterNode:
    node_id: int
    zone: str
    args: list[str]
    log_path: Path
    proc: subprocess.Popen[str] | None = None
    port: int = 0
    http_port: int = 0
    env: dict[str, str] | None = None  # added to this process's environment

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.log_path, "a")  # noqa: SIM115 - the child's stderr for its life
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zonegate", "node", *self.args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, **self.env} if self.env else None,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = _LINE.search(line)
        if m is None:
            self.proc.kill()
            raise RuntimeError(
                f"node {self.node_id} did not start: {line!r}\n{self.log_path.read_text()[-3000:]}"
            )
        self.port, self.http_port = int(m.group(1)), int(m.group(4))

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def metrics(self) -> list[tuple[str, dict[str, str], float]]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=10)
        out = []
        for line in text.read().decode().splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, value = line.rsplit(" ", 1)
            if "{" in name_labels:
                name, labels_text = name_labels.split("{", 1)
                labels = dict(re.findall(r'(\w+)="([^"]*)"', labels_text))
            else:
                name, labels = name_labels, {}
            out.append((name, labels, float(value)))
        return out


@dataclass
class Cluster:
    root: Path
    nodes: list[ClusterNode] = field(default_factory=list)

    def in_zone(self, zone: str) -> list[ClusterNode]:
        return [n for n in self.nodes if n.zone == zone and n.alive()]

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def traffic(self) -> dict[str, float]:
        """Cluster-wide bytes from the nodes' own counters, each transfer counted once."""
        cross = 0.0
        by_kind: dict[str, float] = {}
        for n in self.nodes:
            if not n.alive():
                continue
            for name, labels, value in n.metrics():
                if name not in (
                    "zonegate_traffic_sent_bytes_total",
                    "zonegate_traffic_received_bytes_total",
                ):
                    continue
                kind = labels["kind"]
                sent = name == "zonegate_traffic_sent_bytes_total"
                # A forward RPC is seen by both ends: count what each end sent, once.
                if kind == "forward_rpc" and not sent:
                    continue
                by_kind[kind] = by_kind.get(kind, 0.0) + value
                if labels["peer_zone"] and labels["peer_zone"] != labels["node_zone"]:
                    cross += value
        return {"cross_zone": cross, **by_kind}


def start_cluster(
    root: Path,
    zones: Sequence[str],
    per_zone: int,
    extra: Sequence[str] = (),
    *,
    start: bool = True,
) -> Cluster:
    """Nodes 1, 2, ... `per_zone` to a zone, started (`start`), or left for the test to
    start one by one (`ClusterNode.start`)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "objects").mkdir(exist_ok=True)
    cluster = Cluster(root)
    node_id = 1
    for zone in zones:
        for _ in range(per_zone):
            args = [
                "--listen",
                "127.0.0.1:0",
                "--http-port",
                "0",
                "--node-id",
                str(node_id),
                "--zone",
                zone,
                "--data-dir",
                str(root / f"node-{node_id}"),
                "--metastore",
                f"sqlite:///{root / 'meta.db'}",
                "--object-store",
                (root / "objects").resolve().as_uri(),
                "--lease-ms",
                "3000",
                "--usage-interval-s",
                "2",
                *extra,
            ]
            n = ClusterNode(node_id, zone, args, root / f"node-{node_id}.log")
            cluster.nodes.append(n)
            node_id += 1
    if not start:
        return cluster
    try:
        for n in cluster.nodes:
            n.start()
    except Exception:
        cluster.stop()
        raise
    time.sleep(1.0)  # every node has seen every other's lease
    return cluster


def wait_until(predicate, timeout: float = 30.0, step: float = 0.2) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False
