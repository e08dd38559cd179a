"""Retention after compaction frees the bucket at Kafka's segment granularity (issue 30).

A real node on moto's S3 server over HTTP, real clients: a topic with small
segments is compacted into stream objects that each span many segments, then
its retention.ms is shortened so that part of it, then all of it, expires.
Retention checks and object GC passes run when the test calls them (their
intervals are an hour), so "within one retention check and one GC pass" is
what is asserted: then the bucket holds what the index names plus at most one
segment of the partition (no object waits out a delete delay: it is 0 here).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.clients import ck_watermarks, wait_until
from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server
from zonegate.storage.stream_objects import is_stream_key

pytestmark = pytest.mark.e2e

BUCKET = "zonegate-retention-compaction"
TOPIC = "short-segments"
SEGMENT_MS = 200


@pytest.fixture
def moto() -> Iterator[MotoS3Server]:
    with MotoS3Server(default_bucket=BUCKET) as server, pytest.MonkeyPatch.context() as mp:
        for k, v in FAKE_AWS_ENV.items():
            mp.setenv(k, v)
        yield server


def _bucket_bytes(client: Any, prefix: str) -> int:
    total = 0
    for kind in ("wal/", "streams/"):
        out = client.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/{kind}")
        total += sum(o["Size"] for o in out.get("Contents", []))
    return total


def _index(node: InProcessNode) -> list[tuple[str, int]]:
    """(object key, length) of every index entry."""
    db = sqlite3.connect(f"file:{node.data_dir / 'meta.db'}?mode=ro", uri=True, timeout=30)
    try:
        rows = db.execute("SELECT object_key, length FROM stream_index ORDER BY base_offset")
        return [(str(k), int(n)) for k, n in rows]
    finally:
        db.close()


def _largest_segment(node: InProcessNode) -> int:
    n = node.nodes[0]
    (part,) = [p for p in n.catalog.partitions() if p.topic == TOPIC]
    head = node.call(n.local_leader.changes.head(part.stream_id))
    return max((s.bytes for s in head.segments), default=0)


def _set_retention(node: InProcessNode, retention_ms: int) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    op = AlterConfigOpType.SET
    entry = ConfigEntry("retention.ms", str(retention_ms), incremental_operation=op)
    res = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[entry])]
    )
    next(iter(res.values())).result(30)


def _check_and_collect(node: InProcessNode) -> None:
    """One retention check, then one object GC pass, on the node's loop."""
    jobs = node.nodes[0].maintenance
    node.call(jobs.retention.run_once())
    node.call(jobs.gc.run_once())


def test_retention_after_compaction_frees_the_bucket_segment_by_segment(
    inprocess_factory: InProcessFactory, moto: MotoS3Server
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = f"run-{time.monotonic_ns()}"
    hour = "3600000"
    node = inprocess_factory(
        [
            "--zones",
            "zone-a",
            "--object-store",
            f"s3://{BUCKET}/{prefix}",
            "--s3-endpoint",
            moto.endpoint_url,
            "--wal-seal-age-ms",
            "20",
            # Compaction every 3 s rewrites what waited 0.5 s: objects of many segments.
            "--compaction-interval-ms",
            "3000",
            "--compaction-max-delay-ms",
            "500",
            "--log-retention-check-interval-ms",
            hour,
            "--gc-interval-ms",
            hour,
            "--log-segment-delete-delay-ms",
            "0",
            "--gc-orphan-grace-ms",
            "1000",
        ]
    )
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    configs = {"retention.ms": hour, "segment.ms": str(SEGMENT_MS)}
    admin.create_topics([NewTopic(TOPIC, 1, config=configs)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    start_ms = int(time.time() * 1000)
    n = 0
    while time.time() * 1000 - start_ms < 3000:  # ~15 segments of 200 ms
        for _ in range(20):
            p.produce(TOPIC, value=b"%08d" % n + b"x" * 500, partition=0)
            n += 1
        p.poll(0)
        time.sleep(0.02)
    assert p.flush(30) == 0
    client = moto.client()

    def compacted() -> bool:
        rows = _index(node)
        return bool(rows) and all(is_stream_key(k) for k, _ in rows)

    wait_until("every range in stream objects", compacted, timeout=60)
    objects = {k for k, _ in _index(node)}
    assert len(objects) < 15 / 2  # a stream object spans several segments
    time.sleep(1.2)  # past the orphan grace of every object
    _check_and_collect(node)  # nothing expires in an hour; the WAL objects go
    assert _bucket_bytes(client, prefix) == sum(size for _, size in _index(node))

    # Shorten retention.ms to halfway through the produce run: part of the log expires.
    _set_retention(node, int(time.time() * 1000) - (start_ms + 1500))
    wait_until(
        "the new retention.ms in force",
        lambda: node.nodes[0].led.retention_targets()[0][1].retention_ms < int(hour),
    )
    _check_and_collect(node)
    low, high = ck_watermarks(node.bootstrap, TOPIC)
    assert 0 < low < high == n
    split = node.nodes[0].maintenance.splitter.stats  # the head object, by segment
    assert split.objects_split == 1 and split.objects_written > 1 and split.bytes_rewritten > 0
    named = sum(size for _, size in _index(node))
    stored = _bucket_bytes(client, prefix)
    assert named <= stored <= named + _largest_segment(node)
    # The records left read back whole, from the new log start.
    c = Consumer(
        {"bootstrap.servers": node.bootstrap, "group.id": "after", "enable.auto.commit": False}
    )
    c.assign([TopicPartition(TOPIC, 0, low)])
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < high - low and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            assert m.value() is not None and int(m.value()[:8]) == m.offset()
            got.append(m.offset())
    c.close()
    assert got == list(range(low, high))

    # Then all of it expires: one check and one pass leave the bucket empty.
    _set_retention(node, 1000)
    wait_until(
        "the new retention.ms in force",
        lambda: node.nodes[0].led.retention_targets()[0][1].retention_ms == 1000,
    )
    _check_and_collect(node)
    assert ck_watermarks(node.bootstrap, TOPIC) == (n, n)
    assert _index(node) == [] and _bucket_bytes(client, prefix) == 0
