"""A 3-zone, 6-node cluster on PostgreSQL and moto's S3 server, and three idempotent
producers (one per zone) that record when each record was acknowledged, for the
deployment test (test_production_cluster.py) and anyone measuring the same.

Every node has fixed ports (a restart comes back where clients knew it) and its own
data directory; all share one PostgreSQL database and one S3 bucket.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.cluster_harness import ClusterNode
from tests.node_harness import free_port_block
from tests.s3_server import FAKE_AWS_ENV

ZONES = ("zone-a", "zone-b", "zone-c")


def start_nodes(
    root: Path, metastore: str, s3_endpoint: str, per_zone: int = 2
) -> list[ClusterNode]:
    nodes = []
    node_id = 1
    for zone in ZONES:
        for _ in range(per_zone):
            base = free_port_block(3)
            args = [
                "--listen", f"127.0.0.1:{base}", "--rpc-listen", f"127.0.0.1:{base + 1}",
                "--http-port", str(base + 2), "--node-id", str(node_id), "--zone", zone,
                "--data-dir", str(root / f"node-{node_id}"), "--metastore", metastore,
                "--object-store", "s3://zonegate-test/cluster", "--s3-endpoint", s3_endpoint,
                "--num-partitions", "6", "--usage-interval-s", "5",
            ]  # fmt: skip
            nodes.append(
                ClusterNode(node_id, zone, args, root / f"node-{node_id}.log", env=FAKE_AWS_ENV)
            )
            node_id += 1
    for n in nodes:
        n.start()
    return nodes


@dataclass
class ZoneProducer:
    """Produces `zone:seq` records at a steady rate; keeps each ack's time."""

    zone: str
    bootstrap: str
    topic: str
    interval_s: float = 0.005
    acked: list[tuple[int, float]] = field(default_factory=list)  # (seq, monotonic time)
    errors: list[str] = field(default_factory=list)  # errors a delivery reported
    sent: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.zone}")
        self._thread.start()

    def _run(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": f"producer-{self.zone},zonegate_az={self.zone}",
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )

        def delivered(err: KafkaError | None, msg: object) -> None:
            now = time.monotonic()
            with self._lock:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    seq = int(msg.value().decode().split(":")[1])  # type: ignore[attr-defined]
                    self.acked.append((seq, now))

        next_at = time.monotonic()
        while not self._stop.is_set():
            p.produce(self.topic, f"{self.zone}:{self.sent}".encode(), on_delivery=delivered)
            self.sent += 1
            p.poll(0)
            next_at += self.interval_s
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()  # behind (a stall): do not burst to catch up
        p.flush(120)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(180)

    def ack_times(self) -> list[float]:
        with self._lock:
            return sorted(t for _, t in self.acked)


def longest_stall(producers: list[ZoneProducer], since: float, until: float) -> float:
    """The longest time, over all producers, with no acknowledgement in [since, until]."""
    worst = 0.0
    for p in producers:
        times = [since, *(t for t in p.ack_times() if since <= t <= until), until]
        worst = max(worst, max(b - a for a, b in zip(times, times[1:], strict=False)))
    return worst


def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[str]:
    """Every record of the topic, from the start of each partition to its end offset
    (read when called: the producers have stopped), or until nothing came for 10 s."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "audit",
            "enable.auto.commit": False,
            "client.id": "audit,zonegate_az=zone-a",
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    # Reading up to each partition's end offset is reading all of it: the 10 s of
    # silence that also end the read are then not waited out after the last record.
    ends = {
        p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(partitions)
    }
    next_offset = dict.fromkeys(range(partitions), 0)
    out: list[str] = []
    idle_since = time.monotonic()
    while (
        time.monotonic() - idle_since < 10
        and len(out) < expected + 1000
        and any(next_offset[p] < ends[p] for p in range(partitions))
    ):
        m = c.poll(1.0)
        if m is None or m.error() is not None:
            continue
        out.append(m.value().decode())
        next_offset[m.partition()] = m.offset() + 1
        idle_since = time.monotonic()
    c.close()
    return out
