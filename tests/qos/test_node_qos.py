"""Every object-store call of a running node goes through its scheduler, in its class:
WAL uploads as produce, a Fetch's reads as tail or catch-up, GC and usage records as
housekeeping; /metrics shows each class."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.inprocess import start_inprocess_node
from tests.node_harness import free_port_block

pytestmark = pytest.mark.integration


def _consume(bootstrap: str, client_id: str, n: int) -> None:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"g-{client_id}",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe(["orders"])
    got = 0
    while got < n:
        m = c.poll(30)
        assert m is not None and m.error() is None
        got += 1
    c.close()


@pytest.mark.parametrize(
    ("window_ms", "read_class"), [(0, "catch_up_fetch"), (600_000, "tail_fetch")]
)
def test_reads_another_node_wrote_are_scheduled_by_the_datas_age(
    tmp_path: Path, window_ms: int, read_class: str
) -> None:
    http = free_port_block(2)
    node = start_inprocess_node(
        tmp_path / "data",
        [
            "--zones", "zone-a,zone-b",
            "--http-port", str(http),
            "--qos-tail-window-ms", str(window_ms),
            "--qos-put-bytes-per-s", "20000000",
            "--qos-get-requests-per-s", "500",
        ],
    )  # fmt: skip
    try:
        p = Producer({"bootstrap.servers": node.bootstrap, "client.id": "shop,zonegate_az=zone-a"})
        for i in range(300):
            p.produce("orders", f"order {i}".encode())
        assert p.flush(30) == 0
        # zone-b's node did not write these WAL objects: its log cache misses, it GETs.
        _consume(node.bootstrap, "billing,zonegate_az=zone-b", 300)
        a, b = node.nodes
        assert a.qos.lanes["put"].stats("produce").granted_bytes > 0
        reads = b.qos.lanes["get"].stats(read_class)
        assert reads.granted_requests > 0 and reads.granted_bytes > 0
        other = "tail_fetch" if read_class == "catch_up_fetch" else "catch_up_fetch"
        assert b.qos.lanes["get"].stats(other).granted_requests == 0
        # Health probes and usage records are housekeeping; nothing went unscheduled.
        store = b.store.stats()
        lanes = b.qos.lanes
        assert (
            store.get_requests
            == sum(lanes["get"].stats(c).granted_requests for c in ("tail_fetch", "catch_up_fetch"))
            + lanes["get"].stats("housekeeping").granted_requests
        )
        text = urllib.request.urlopen(f"http://127.0.0.1:{http + 1}/metrics", timeout=10).read()
        page = text.decode()
        for family in (
            "zonegate_qos_granted_bytes_total",
            "zonegate_qos_granted_requests_total",
            "zonegate_qos_queue_depth",
            "zonegate_qos_wait_seconds_bucket",
        ):
            assert family in page, family
        assert f'io_class="{read_class}",lane="get"' in page
    finally:
        node.stop()


def test_a_get_budget_is_honoured_by_a_running_node(tmp_path: Path) -> None:
    rate = 1_000_000
    node = start_inprocess_node(
        tmp_path / "data",
        ["--zones", "zone-a,zone-b", "--qos-get-bytes-per-s", str(rate)],
    )
    try:
        p = Producer({"bootstrap.servers": node.bootstrap, "client.id": "w,zonegate_az=zone-a"})
        for _ in range(400):
            p.produce("orders", b"v" * 10_000)
        assert p.flush(30) == 0
        reads = node.nodes[1].qos.lanes["get"]
        start = time.monotonic()
        _consume(node.bootstrap, "r,zonegate_az=zone-b", 400)
        elapsed = time.monotonic() - start
        got = sum(reads.stats(c).granted_bytes for c in ("tail_fetch", "catch_up_fetch"))
        # zone-b's node GETs what zone-a's wrote, never faster than its budget: 4 MB at
        # 1 MB/s take at least 4 s, less the 50 ms burst.
        assert got >= 4_000_000
        assert elapsed >= (got - 0.05 * rate) / rate
        assert sum(reads.stats(c).wait.sum for c in ("tail_fetch", "catch_up_fetch")) > 1.0
    finally:
        node.stop()
