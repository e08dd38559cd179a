"""A real Apache Kafka broker for the tests: one KRaft node, started and always stopped.

The oracle for differential tests and the peer for benchmarks: the same
version as the Java client and tools (tests/java/pom.xml, run through
tests/java_peer.py). One process is both broker and controller, formatted with
Kafka's storage tool in a temporary directory and listening on free loopback
ports, tuned small for a 2-core machine: a 512 MB heap, few threads,
replication factors of 1 for the internal topics, and no initial rebalance
delay so a group forms as soon as its members join.
"""

from __future__ import annotations

import base64
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from tests import java_peer
from tests.node_harness import free_port_block

_JVM_OPTS: tuple[str, ...] = (
    # kafka-server-start.sh's performance options, with a heap for a small machine.
    "-Xms512m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)


def _cluster_id() -> str:
    """A Kafka Uuid as its tools print one: 16 random bytes, URL-safe base64, no padding;
    never starting with '-', which `kafka-storage format --cluster-id` would take for an
    option (Kafka's Uuid.randomUuid draws again for the same reason)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class ApacheKafkaBroker:
    """`start()` formats the storage and starts the node; `bootstrap` is its client address."""

    node_id = 1

    def __init__(self, root: Path, extra: dict[str, str] | None = None) -> None:
        self.root = root
        self.extra = dict(extra or {})  # more server.properties lines (an authorizer)
        self.cluster_id = _cluster_id()
        self.port = 0
        self.controller_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = root / "server.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        base = free_port_block(2)
        self.port, self.controller_port = base, base + 1
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.root / "data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        }
        settings.update(self.extra)
        path = self.root / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        return path

    def start(self, timeout: float = 90) -> ApacheKafkaBroker:
        self.root.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        java_peer.run_class(
            java_peer.TOOLS["kafka-storage"],
            ["format", "--cluster-id", self.cluster_id, "--config", str(config)],
            check=True,
        )
        log4j = java_peer.log4j2_option(self.root, self.log_path)
        self.proc = subprocess.Popen(
            java_peer.java_command(
                java_peer.TOOLS["kafka-server-start"], [str(config)], (*_JVM_OPTS, log4j)
            ),
            stdin=subprocess.DEVNULL,
            stdout=open(self.root / "stdout.log", "wb"),  # noqa: SIM115 - the child's, for its life
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            # The broker logs this once it serves clients on its listener.
            if self.log_path.exists() and "Kafka Server started" in self.log_path.read_text():
                self._wait_port()
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Apache Kafka did not start:\n{self.log_tail()}")

    def _wait_port(self) -> None:
        for _ in range(50):
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"Apache Kafka's listener never opened:\n{self.log_tail()}")

    def log_tail(self, chars: int = 6000) -> str:
        out = []
        for p in (self.root / "stdout.log", self.log_path):
            if p.exists():
                out.append(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # a controlled shutdown, as kafka-server-stop.sh
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
