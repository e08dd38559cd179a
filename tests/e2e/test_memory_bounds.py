"""A node flooded with more and larger requests than it can take stays up with bounded
memory (queued.max.request.bytes), refuses connections beyond max.connections.per.ip,
and keeps serving another client meanwhile."""

from __future__ import annotations

import datetime
import socket
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.e2e.conftest import NodeFactory
from tests.kafka_raw import RawConnection
from zonegate.proxy.codec import encode_request
from zonegate.records.build import build_batch

pytestmark = pytest.mark.e2e

MiB = 1024 * 1024
CONNECTIONS = 200
REQUESTS_EACH = 3  # 600 MiB offered at once, far more than the node may hold
QUEUED_MAX = 64 * MiB
# What the node may hold: its own start (~100 MiB of Python, kio, grpc, pyarrow), the
# log cache of WAL objects it wrote (256 MiB by default), the request pool, and about
# as much again for the copies a request makes on its way (decoded records, the open
# WAL object, the upload), with room for the allocator. Offered ten times the pool, it
# stays under this.
RSS_BOUND = 600 * MiB


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _produce_frame(topic: str, batch: bytes, cid: int) -> bytes:
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=60),
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )
    return encode_request(cid, f"flood-{cid}", request)


def test_a_flood_of_large_produce_requests_keeps_memory_bounded(node_factory: NodeFactory) -> None:
    node = node_factory(
        [
            "--zones", "z",
            "--queued-max-request-bytes", str(QUEUED_MAX),
            "--max-connections-per-ip", str(CONNECTIONS + 20),
        ]
    )  # fmt: skip
    assert node.proc is not None
    pid = node.proc.pid
    warm = Producer({"bootstrap.servers": node.bootstrap})
    warm.produce("flood", b"x")
    warm.produce("other", b"x")
    assert warm.flush(30) == 0
    start_rss = _rss(pid)
    batch = build_batch([(None, b"f" * (MiB - 200), (), int(time.time() * 1000))])
    frames = [_produce_frame("flood", batch, i) for i in range(REQUESTS_EACH)]
    answered = [0]
    lock = threading.Lock()

    def flood() -> None:
        try:
            with socket.create_connection(("127.0.0.1", node.port), timeout=120) as s:
                for f in frames:
                    s.sendall(f)
                for _ in frames:  # read the answers only once everything is sent
                    head = _recv(s, 4)
                    _recv(s, int.from_bytes(head, "big"))
                    with lock:
                        answered[0] += 1
        except OSError:
            pass

    peak = [start_rss]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=flood, daemon=True) for _ in range(CONNECTIONS)]
    for t in threads:
        t.start()
    # Meanwhile another client produces and is answered.
    other = Producer({"bootstrap.servers": node.bootstrap, "client.id": "other", "linger.ms": 0})
    latencies = []
    while any(t.is_alive() for t in threads) and len(latencies) < 200:
        sent = time.monotonic()
        other.produce("other", b"small")
        assert other.flush(60) == 0, "the other client was not served"
        latencies.append(time.monotonic() - sent)
    for t in threads:
        t.join(300)
    done.set()
    sampler.join(5)
    print(
        f"flood: {answered[0]} of {CONNECTIONS * REQUESTS_EACH} answered; RSS "
        f"{start_rss / MiB:.0f} MiB at start, {peak[0] / MiB:.0f} MiB at most; the other "
        f"client's {len(latencies)} produces took {1000 * max(latencies):.0f} ms at most"
    )
    assert answered[0] == CONNECTIONS * REQUESTS_EACH
    assert peak[0] < RSS_BOUND
    assert node.alive()


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return buf


def test_connections_beyond_max_connections_per_ip_are_closed(node_factory: NodeFactory) -> None:
    node = node_factory(["--zones", "z", "--max-connections-per-ip", "3"])
    kept = [RawConnection(node.port) for _ in range(3)]
    extra = socket.create_connection(("127.0.0.1", node.port), timeout=10)
    assert extra.recv(1) == b""  # closed by the node at once
    extra.close()
    kept[0].close()
    time.sleep(0.5)  # the node sees the close
    again = RawConnection(node.port)  # a place is free again
    again.close()
    for c in kept[1:]:
        c.close()
    assert node.alive()
