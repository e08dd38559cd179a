"""The metrics an operator needs, read from /metrics after real traffic, and /readyz
following the stores: 503 while the metadata store or the object store is down."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster_harness import ClusterNode, wait_until
from tests.inprocess import start_inprocess_node
from tests.node_harness import free_port_block
from tests.postgres_server import PostgresServer
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server

pytestmark = pytest.mark.integration


def _scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        name, _, rest = name_labels.partition("{")
        labels = tuple(tuple(kv.split("=", 1)) for kv in rest.rstrip("}").split(",") if kv)
        out.setdefault(name, {})[tuple((k, v.strip('"')) for k, v in labels)] = float(value)
    return out


def _ready(port: int) -> int:
    try:
        return int(urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10).status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _labels(series: dict[tuple[tuple[str, str], ...], float], key: str) -> set[str]:
    return {dict(labels).get(key, "") for labels in series}


def test_each_family_is_there_after_traffic(tmp_path: Path) -> None:
    http = free_port_block(3)
    node = start_inprocess_node(tmp_path / "data", ["--http-port", str(http), "--zones", "z"])
    try:
        p = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
        for i in range(200):
            p.produce("orders", f"order {i}".encode())
        p.flush(30)
        c = Consumer(
            {
                "bootstrap.servers": node.bootstrap,
                "group.id": "billing",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe(["orders"])
        got = 0
        while got < 50:
            m = c.poll(30)
            assert m is not None and m.error() is None
            got += 1
        c.commit(offsets=[TopicPartition("orders", 0, 50)], asynchronous=False)
        # A request answered with an error: a topic that does not exist, not auto-made.
        c.close()

        # Group lag is measured every 10 s, off the scrape's path: wait for a pass.
        def lag() -> float | None:
            series = _scrape(http).get("zonegate_consumer_group_lag", {})
            return next(iter(series.values()), None)

        assert wait_until(lambda: lag() is not None, timeout=30)
        m = _scrape(http)
        assert lag() == 150.0, "200 produced, 50 committed"

        apis = _labels(m["zonegate_request_latency_seconds_count"], "api")
        assert {"Produce", "Fetch", "Metadata", "JoinGroup", "OffsetCommit"} <= apis, apis
        stages = {dict(k)["stage"]: v for k, v in m["zonegate_produce_stage_seconds_count"].items()}
        assert set(stages) == {"wal_seal_wait", "put", "leader_commit"}
        assert all(v > 0 for v in stages.values()), stages
        ops = _labels(m["zonegate_object_store_latency_seconds_count"], "op")
        assert {"put", "get_range"} <= ops, ops
        assert sum(m["zonegate_wal_object_bytes_count"].values()) >= 1
        assert sum(m["zonegate_wal_object_bytes_sum"].values()) > 200 * 7
        assert list(m["zonegate_partitions_led"].values()) == [1.0]
        assert "zonegate_connections" in m
        assert list(m["zonegate_ready"].values()) == [1.0]
        assert list(m["zonegate_controller_active"].values()) == [1.0], "the only node"
        assert list(m["zonegate_zone_live_nodes"].values()) == [1.0]
        # The first Produce of a new topic, or the group's first OffsetFetch, answers
        # with an error code a client retries; every answered error is counted by code.
        assert "zonegate_errors_total" in m
        # GETs and PUTs by purpose; the block cache (empty: nothing is compacted yet).
        puts = m["zonegate_object_store_class_requests_total"]
        assert {dict(k)["io_class"] for k in puts if dict(k)["op"] == "put"}, puts
        assert "zonegate_object_store_class_bytes_total" in m
        assert list(m["zonegate_block_cache_bytes"].values()) == [0.0]
        assert _labels(m["zonegate_block_cache_lookups_total"], "result") == {"hit", "miss"}
    finally:
        node.stop()


def test_errors_are_counted_by_api_and_code(tmp_path: Path) -> None:
    http = free_port_block(3)
    node = start_inprocess_node(
        tmp_path / "data",
        ["--http-port", str(http), "--zones", "z", "--auto-create-topics", "false"],
    )
    try:
        p = Producer({"bootstrap.servers": node.bootstrap, "message.timeout.ms": 2000})
        p.produce("missing", b"x")
        p.flush(10)
        errors = _scrape(http)["zonegate_errors_total"]
        named = {(dict(k)["api"], dict(k)["error"]) for k in errors}
        assert ("Metadata", "unknown_topic_or_partition") in named, named
    finally:
        node.stop()


def test_readyz_follows_the_metadata_store_and_the_object_store(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = postgres_server.new_database()
    with MotoS3Server() as s3:
        node = ClusterNode(
            1,
            "zone-a",
            [
                "--listen",
                "127.0.0.1:0",
                "--http-port",
                "0",
                "--node-id",
                "1",
                "--data-dir",
                str(tmp_path / "node"),
                "--metastore",
                url,
                "--object-store",
                "s3://zonegate-test/wal",
                "--s3-endpoint",
                s3.endpoint_url,
            ],  # fmt: skip
            tmp_path / "node.log",
            env=FAKE_AWS_ENV,
        )
        node.start()
        try:
            assert wait_until(lambda: _ready(node.http_port) == 200)
            postgres_server.stop()
            try:
                assert wait_until(lambda: _ready(node.http_port) == 503), node.log_path.read_text()
            finally:
                postgres_server.start()
            assert wait_until(lambda: _ready(node.http_port) == 200), "recovered by itself"
            s3.stop()
            assert wait_until(lambda: _ready(node.http_port) == 503, timeout=60)
            m = _scrape(node.http_port)
            assert list(m["zonegate_ready"].values()) == [0.0]
        finally:
            node.stop()
    time.sleep(0)
