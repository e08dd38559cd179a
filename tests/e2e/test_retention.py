"""Retention by time and by size, DeleteRecords, and object GC, with real clients (issue 14).

Real nodes on the local store and on moto's S3 server: the log start moves as
Kafka's would, consumers behind it get OFFSET_OUT_OF_RANGE and reset by their
policy, and the objects nothing names any more leave the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.clients import ck_watermarks, wait_until
from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode
from tests.node_harness import free_port_block
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server

pytestmark = pytest.mark.e2e

# Short everything: retention checked, GC run and graces all within a second.
FAST = [
    "--log-retention-check-interval-ms",
    "200",
    "--gc-interval-ms",
    "200",
    "--log-segment-delete-delay-ms",
    "0",
    "--gc-orphan-grace-ms",
    "1000",
]


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3Server]:
    with MotoS3Server(default_bucket="zonegate-retention") as server:
        yield server


@pytest.fixture(params=["file", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[list[str], Callable[[], list[str]]]]:
    """(node arguments, a function listing the WAL objects' units) for each store."""
    if request.param == "file":
        root = tmp_path / "objects"

        def listed() -> list[str]:
            return sorted(
                str(p.relative_to(root)) for p in (root / "wal").rglob("*") if p.is_file()
            )

        yield ["--object-store", root.as_uri()], listed
        return
    moto: MotoS3Server = request.getfixturevalue("moto")
    prefix = f"run-{time.monotonic_ns()}"
    client = moto.client()

    def listed_s3() -> list[str]:
        out = client.list_objects_v2(Bucket="zonegate-retention", Prefix=f"{prefix}/wal/")
        return sorted(o["Key"] for o in out.get("Contents", []))

    with pytest.MonkeyPatch.context() as mp:
        for k, v in FAKE_AWS_ENV.items():
            mp.setenv(k, v)
        yield (
            [
                "--object-store",
                f"s3://zonegate-retention/{prefix}",
                "--s3-endpoint",
                moto.endpoint_url,
                "--wal-seal-age-ms",
                "20",
            ],
            listed_s3,
        )


def _admin(node: InProcessNode) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": node.bootstrap})


def _create(node: InProcessNode, topic: str, configs: dict[str, str], partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(node)  # kept while the future runs: a dropped client ends its requests
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, config=configs)])
    fut[topic].result(30)


def _alter(node: InProcessNode, topic: str, name: str, value: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    admin = _admin(node)
    res = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])]
    )
    next(iter(res.values())).result(30)
    # Every node sees it at its next catalog refresh (half a heartbeat).
    time.sleep(0.5)


def _produce(
    node: InProcessNode, topic: str, n: int, *, partition: int = 0, size: int = 100
) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"%06d" % i + b"x" * size, partition=partition)
        if i % 20 == 19:
            p.flush(30)  # several batches, in several WAL objects
    assert p.flush(30) == 0


def _read_from(
    node: InProcessNode, topic: str, offset: int, reset: str, n: int, wait: float = 30
) -> list[int]:
    """Offsets a confluent-kafka consumer positioned at `offset` reads, resetting by `reset`."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": f"behind-{time.monotonic_ns()}",
            "auto.offset.reset": reset,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, 0, offset)])
    got: list[int] = []
    deadline = time.monotonic() + wait
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.offset())
    c.close()
    return got


def test_retention_by_time_and_gc_empty_the_store(
    inprocess_factory: InProcessFactory, store: tuple[list[str], Callable[[], list[str]]]
) -> None:
    args, listed = store
    http = free_port_block(1)
    node = inprocess_factory([*FAST, *args, "--zones", "zone-a", "--http-port", str(http)])
    _create(node, "by-time", {"retention.ms": "1500", "segment.ms": "300"})
    _produce(node, "by-time", 100)
    low, high = ck_watermarks(node.bootstrap, "by-time")
    assert (low, high) == (0, 100)
    assert listed(), "the WAL objects are in the store"
    # Every segment's newest record is older than retention.ms: all of them go, the
    # active one too (Kafka rolls it), and the log starts at its end.
    wait_until(
        "the log start to reach the end",
        lambda: ck_watermarks(node.bootstrap, "by-time") == (100, 100),
    )
    wait_until("object GC to empty the store", lambda: listed() == [])
    # A consumer at offset 5 is behind the log start: it resets, as its policy says.
    # (An hour's retention from now on, so that the new records stay while it reads.)
    _alter(node, "by-time", "retention.ms", "3600000")
    _produce(node, "by-time", 10)
    assert _read_from(node, "by-time", 5, "earliest", 10) == list(range(100, 110))
    log = node.log_text()
    assert "retention of by-time-0 dropped" in log and "object GC deleted" in log
    # The metrics say what went: entries and bytes dropped, objects deleted, none left.
    metrics = _metrics(http)
    assert metrics['zonegate_retention_deleted_segments_total{node="1"}'] > 0
    assert metrics['zonegate_gc_deleted_objects_total{node="1"}'] > 0
    assert metrics['zonegate_gc_deleted_bytes_total{node="1"}'] > 0
    assert metrics['zonegate_gc_pending_objects{node="1"}'] >= 0
    assert 'zonegate_storage_bytes{kind="wal",node="1"}' in metrics


def _metrics(port: int) -> dict[str, float]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_retention_by_size_keeps_at_least_the_limit(inprocess_factory: InProcessFactory) -> None:
    node = inprocess_factory([*FAST, "--zones", "zone-a"])
    # Segments of at most ~1 KiB; keep at least 3 KiB.
    _create(node, "by-size", {"retention.bytes": "3000", "segment.bytes": "1000"})
    _produce(node, "by-size", 200, size=100)
    wait_until("retention by size", lambda: ck_watermarks(node.bootstrap, "by-size")[0] > 0)
    time.sleep(1)  # a few more checks: the start must not move on
    low, high = ck_watermarks(node.bootstrap, "by-size")
    assert high == 200 and 0 < low < 200
    # What stays holds at least retention.bytes: each record takes ~180 bytes in its batch.
    assert (high - low) * 100 >= 3000
    assert _read_from(node, "by-size", low, "error", high - low) == list(range(low, high))


def test_delete_records_with_both_admin_clients(inprocess_factory: InProcessFactory) -> None:
    from confluent_kafka import TopicPartition
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition

    node = inprocess_factory(["--zones", "zone-a"])
    _create(node, "trim", {}, partitions=2)
    _produce(node, "trim", 50, partition=0)
    _produce(node, "trim", 50, partition=1)
    admin = _admin(node)
    futures = admin.delete_records([TopicPartition("trim", 0, 30)])
    (result,) = futures.values()
    assert result.result(30).low_watermark == 30
    assert ck_watermarks(node.bootstrap, "trim", 0) == (30, 50)
    kadmin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        answer = kadmin.delete_records({KTopicPartition("trim", 1): -1})  # -1: to the end
        assert answer[KTopicPartition("trim", 1)]["low_watermark"] == 50
    finally:
        kadmin.close()
    assert ck_watermarks(node.bootstrap, "trim", 1) == (50, 50)
    # Past the high watermark: OFFSET_OUT_OF_RANGE, nothing moves.
    bad = admin.delete_records([TopicPartition("trim", 0, 51)])
    with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE|out of range"):
        next(iter(bad.values())).result(30)
    assert ck_watermarks(node.bootstrap, "trim", 0) == (30, 50)
    # A consumer behind the new start resets: earliest reads from 30, latest waits at 50.
    assert _read_from(node, "trim", 10, "earliest", 20) == list(range(30, 50))
    assert _read_from(node, "trim", 10, "latest", 1, wait=3) == []  # none comes


def _index_rows(node: InProcessNode) -> int:
    import sqlite3

    db = sqlite3.connect(f"file:{node.data_dir / 'meta.db'}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM stream_index").fetchone()[0])
    finally:
        db.close()


def test_a_steady_produce_run_keeps_the_store_bounded(
    inprocess_factory: InProcessFactory, store: tuple[list[str], Callable[[], list[str]]]
) -> None:
    """Produce at a steady rate for ~8 retention periods: the bucket, the index rows and
    the leader's in-memory index stop growing once retention is reached."""
    from confluent_kafka import Producer

    args, listed = store
    node = inprocess_factory([*FAST, *args, "--zones", "zone-a"])
    retention_s = 2.0
    _create(node, "steady", {"retention.ms": "2000", "segment.ms": "250"}, partitions=2)
    leader = node.nodes[0].local_leader
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    value = b"v" * 1000
    samples: list[tuple[float, int, int, int]] = []  # (t, objects, rows, leader bytes)
    produced = 0
    start = time.monotonic()
    next_sample = start
    while (now := time.monotonic()) - start < 8 * retention_s:
        for _ in range(20):  # ~20 KB each 20 ms: ~1 MB/s
            p.produce("steady", value=value)
            produced += 1
        p.poll(0)
        if now >= next_sample:
            samples.append((now - start, len(listed()), _index_rows(node), leader.stored_bytes()))
            next_sample += 0.5
        time.sleep(0.02)
    assert p.flush(30) == 0
    assert produced > 4000
    # Once retention is reached (two periods in), the last samples are no larger than the
    # largest of the period after it, with room for a GC pass landing late.
    settled = [s for s in samples if 2 * retention_s <= s[0] < 4 * retention_s]
    late = [s for s in samples if s[0] >= 6 * retention_s]
    assert settled and late
    for i, what in ((1, "stored objects"), (2, "index rows"), (3, "leader index bytes")):
        bound = max(s[i] for s in settled) * 1.5 + 5
        assert max(s[i] for s in late) <= bound, (what, samples)
    # What is kept is about what retention keeps: a fraction of what was written.
    kept = leader.stored_bytes()
    assert kept < 0.5 * produced * len(value), (kept, produced)
