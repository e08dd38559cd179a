"""A Kafka Connect worker in distributed mode for the tests: started, killed, always stopped.

Runs Apache Kafka's own org.apache.kafka.connect.cli.ConnectDistributed (the
class behind bin/connect-distributed.sh, from the jars tests/java_peer.py
runs) with a worker properties file written here: its config, offset and status
topics (compacted, replication factor 1), string converters, and a REST
listener on a free loopback port that `rest()` calls with urllib. The
FileStream connectors (connect-file) are on the classpath, which Connect
scans as it would scan plugin.path.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests import java_peer
from tests.node_harness import free_port_block

_JVM_OPTS: tuple[str, ...] = (
    "-Xms64m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)


class ConnectWorker:
    """One worker of the Connect cluster `group_id`; `start()` returns once its REST API
    answers, `kill()` ends it with SIGKILL (no graceful leave, no last offset commit)."""

    def __init__(self, root: Path, bootstrap: str, group_id: str, **overrides: str) -> None:
        self.root = root
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.overrides = overrides
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = root / "connect.log"
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settings(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "config.storage.topic": f"{self.group_id}-configs",
            "offset.storage.topic": f"{self.group_id}-offsets",
            "status.storage.topic": f"{self.group_id}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "3",
            "status.storage.partitions": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "listeners": f"http://127.0.0.1:{self.port}",
            # connect-file carries ServiceLoader manifests: no scan of every jar at start.
            "plugin.discovery": "service_load",
            # Commit source offsets often, so a kill loses (and repeats) little.
            "offset.flush.interval.ms": "1000",
            # A worker that comes back gets its tasks at once, not after up to 5 minutes.
            "scheduled.rebalance.max.delay.ms": "0",
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000",
            # The sink tasks' consumers too: a killed worker's consumer leaves their group
            # after this, not after the consumer's default 45 s.
            "consumer.session.timeout.ms": "6000",
            "consumer.heartbeat.interval.ms": "1000",
            **self.overrides,
        }

    def start(self, timeout: float = 120) -> ConnectWorker:
        self.root.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        if not self.port:
            self.port = free_port_block(1)
        config = self.root / "worker.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.settings().items()))
        log4j = java_peer.log4j2_option(self.root, self.log_path, ("org.apache.kafka.clients",))
        with open(self.log_path, "a") as log:
            log.write(f"--- start {self.starts} ---\n")
        self.proc = subprocess.Popen(
            java_peer.java_command(
                java_peer.TOOLS["connect-distributed"], [str(config)], (*_JVM_OPTS, log4j)
            ),
            stdin=subprocess.DEVNULL,
            stdout=open(self.root / "stdout.log", "ab"),  # noqa: SIM115 - the child's, for its life
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                self.rest("GET", "/connectors")
                return self
            except (OSError, urllib.error.HTTPError):
                time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"Connect worker did not start:\n{self.log_tail()}")

    def rest(self, method: str, path: str, body: Any = None) -> Any:
        """One call of the worker's REST API; the decoded JSON answer (None when empty)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read().decode()
        return json.loads(text) if text else None

    def wait_running(self, connector: str, timeout: float = 120) -> dict[str, Any]:
        """Waits until the connector and its tasks run on this cluster; its status."""
        deadline = time.monotonic() + timeout
        status: Any = None
        while time.monotonic() < deadline:
            try:
                status = self.rest("GET", f"/connectors/{connector}/status")
            except (OSError, urllib.error.HTTPError) as e:
                status = repr(e)
            if (
                isinstance(status, dict)
                and status["connector"]["state"] == "RUNNING"
                and status["tasks"]
                and all(t["state"] == "RUNNING" for t in status["tasks"])
            ):
                return status
            time.sleep(0.5)
        raise AssertionError(f"{connector} not running: {status}\n{self.log_tail()}")

    def log_tail(self, chars: int = 6000) -> str:
        out = []
        for p in (self.root / "stdout.log", self.log_path):
            if p.exists():
                out.append(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
