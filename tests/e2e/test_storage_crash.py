"""kill -9 at every step of retention, compaction and object GC (issues 14 and 15).

A node process runs with `ZONEGATE_CRASH_AT=<step>` and dies there (status 137,
nothing flushed, as kill -9). It restarts without the hook, and then: every
acknowledged record of the topic that keeps its data is read back once, in
order, at its offset; the expired topic starts at its end; the store holds
exactly the objects the index names (nothing leaked, nothing missing); and no
GC row is left behind. WAL objects mix the two topics, so the kept topic's
data sits in objects the expired one also used.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.clients import ck_read_to_end, ck_watermarks, wait_until
from tests.e2e.conftest import NodeFactory
from tests.node_harness import RunningNode
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server
from zonegate.maintenance.gc import unit_of

pytestmark = pytest.mark.e2e

FAST = [
    "--zones",
    "zone-a",
    "--log-retention-check-interval-ms",
    "200",
    "--gc-interval-ms",
    "200",
    "--log-segment-delete-delay-ms",
    "0",
    "--gc-orphan-grace-ms",
    "1000",
]
STEPS = ["retention:after-commit", "gc:before-delete", "gc:after-delete", "gc:after-rows"]
BUCKET = "zonegate-crash"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3Server]:
    with MotoS3Server(default_bucket=BUCKET) as server:
        yield server


Store = tuple[list[str], dict[str, str], Callable[[], set[str]]]


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """(node arguments, node environment, a function listing the stored WAL and stream
    object units)."""
    if request.param == "file":
        root = tmp_path / "objects"

        def listed() -> set[str]:
            return {
                unit_of(str(p.relative_to(root)))
                for kind in ("wal", "streams")
                for p in (root / kind).rglob("*")
                if p.is_file()
            }

        return ["--object-store", root.as_uri()], {}, listed
    moto: MotoS3Server = request.getfixturevalue("moto")
    prefix = f"run-{time.monotonic_ns()}"
    client = moto.client()

    def listed_s3() -> set[str]:
        keys: set[str] = set()
        for kind in ("wal", "streams"):
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=BUCKET, Prefix=f"{prefix}/{kind}/"
            ):
                keys |= {o["Key"][len(prefix) + 1 :] for o in page.get("Contents", [])}
        return keys

    args = [
        "--object-store",
        f"s3://{BUCKET}/{prefix}",
        "--s3-endpoint",
        moto.endpoint_url,
        "--wal-seal-age-ms",
        "20",
    ]
    return args, dict(FAKE_AWS_ENV), listed_s3


def _referenced(node: RunningNode) -> set[str]:
    db = sqlite3.connect(f"file:{node.data_dir / 'meta.db'}?mode=ro", uri=True)
    try:
        return {unit_of(k) for (k,) in db.execute("SELECT DISTINCT object_key FROM stream_index")}
    finally:
        db.close()


def _gc_rows(node: RunningNode) -> int:
    db = sqlite3.connect(f"file:{node.data_dir / 'meta.db'}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM gc_pending").fetchone()[0])
    finally:
        db.close()


def _dies_at_then_restarts(node: RunningNode, step: str, env: dict[str, str]) -> None:
    """The hook ends the node at `step` (status 137, as kill -9); it starts again
    without the hook."""
    assert node.proc is not None
    status = node.proc.wait(60)
    assert status == 137, f"node ended with {status}, not at {step}"
    assert f"killed at {step}" in node.log_text()
    node.env = dict(env)  # no hook: a plain restart
    node.restart()


def _wait_settled(node: RunningNode, listed: Callable[[], set[str]]) -> None:
    """Until the store holds exactly the units the index names, with no GC row left."""
    wait_until(
        "the store to hold exactly what the index names",
        lambda: listed() == _referenced(node) and _gc_rows(node) == 0,
    )


def _produce(node: RunningNode, mixed: int, expiring_only: int) -> None:
    """`mixed` rounds into both topics (their batches share WAL objects), then
    `expiring_only` rounds into the expiring one alone."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(mixed):
        p.produce("keep", value=b"k%05d" % i)
        p.produce("expire", value=b"e%05d" % i)
        if i % 10 == 9:
            assert p.flush(30) == 0
    # The local store's pack files take objects for half the orphan grace: wait that
    # out, so that the expiring topic's own data starts a pack of its own.
    time.sleep(1.0)
    for i in range(expiring_only):
        p.produce("expire", value=b"x%05d" % i)
        if i % 10 == 9:
            assert p.flush(30) == 0
    assert p.flush(30) == 0


def _read_keep(node: RunningNode, n: int) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": node.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    c.assign([TopicPartition("keep", 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    # Nothing more behind them: no duplicate was appended.
    extra = c.poll(1.0)
    c.close()
    assert extra is None or extra.error() is not None, f"unexpected record {extra.offset()}"
    return got


@pytest.mark.parametrize("step", STEPS)
def test_kill9_at_each_retention_and_gc_step(
    node_factory: NodeFactory, store: Store, step: str
) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    args, env, listed = store
    node = node_factory([*FAST, *args], env={**env, "ZONEGATE_CRASH_AT": step})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    futures = admin.create_topics(
        [
            NewTopic("keep", num_partitions=1),
            NewTopic("expire", num_partitions=1, config={"segment.ms": "200"}),
        ]
    )
    for f in futures.values():
        f.result(30)
    _produce(node, mixed=60, expiring_only=60)
    # Only now a short retention: the node dies after every record was acknowledged.
    entry = ConfigEntry("retention.ms", "1500", incremental_operation=AlterConfigOpType.SET)
    res = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "expire", incremental_configs=[entry])]
    )
    next(iter(res.values())).result(30)
    _dies_at_then_restarts(node, step, env)
    wait_until(
        "retention of the expiring topic",
        lambda: ck_watermarks(node.bootstrap, "expire") == (120, 120),
    )
    assert ck_watermarks(node.bootstrap, "keep") == (0, 60)
    got = _read_keep(node, 60)
    assert got == [(i, b"k%05d" % i) for i in range(60)], "lost, reordered or moved records"

    _wait_settled(node, listed)
    stored = listed()
    assert stored, "the kept topic's objects are still there"
    # The kept topic still reads after GC finished: nothing it needs was deleted.
    assert _read_keep(node, 60) == got


COMPACTION_STEPS = ["compaction:after-upload", "compaction:after-swap", "gc:before-delete"]


def _stream_rows(node: RunningNode) -> tuple[int, int]:
    """(index rows in stream objects, index rows in WAL objects) (one topic only)."""
    db = sqlite3.connect(f"file:{node.data_dir / 'meta.db'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT object_key FROM stream_index").fetchall()
    finally:
        db.close()
    streams = sum(1 for (k,) in rows if k.startswith("streams/"))
    return streams, len(rows) - streams


@pytest.mark.parametrize("step", COMPACTION_STEPS)
def test_kill9_at_each_compaction_step(node_factory: NodeFactory, store: Store, step: str) -> None:
    """The node dies after a stream object's upload, after its swap, or before GC deletes
    the WAL objects compaction freed; after a restart every acknowledged record is read
    once, in order, from stream objects, and the store holds exactly what the index
    names."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    args, env, listed = store
    fast = [*FAST, *args, "--compaction-interval-ms", "200"]
    node = node_factory(fast, env={**env, "ZONEGATE_CRASH_AT": step})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for f in admin.create_topics([NewTopic("keep", num_partitions=1)]).values():
        f.result(30)
    _produce_keep(node, 60)
    assert _stream_rows(node)[0] == 0  # an hour's segment.ms: nothing compacted yet
    # Only now a short segment.ms: compaction rewrites the acknowledged records, and dies.
    entry = ConfigEntry("segment.ms", "200", incremental_operation=AlterConfigOpType.SET)
    res = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "keep", incremental_configs=[entry])]
    )
    next(iter(res.values())).result(30)
    _dies_at_then_restarts(node, step, env)
    wait_until("the kept topic in stream objects only", lambda: _stream_rows(node)[1] == 0)
    assert ck_watermarks(node.bootstrap, "keep") == (0, 60)
    got = _read_keep(node, 60)
    assert got == [(i, b"k%05d" % i) for i in range(60)], "lost, reordered or moved records"

    _wait_settled(node, listed)
    assert any(u.startswith("streams/") for u in listed())
    assert not any(u.startswith("wal/") for u in listed()), "WAL objects compaction freed"
    assert _read_keep(node, 60) == got


def _produce_keep(node: RunningNode, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(n):
        p.produce("keep", value=b"k%05d" % i)
        if i % 10 == 9:
            assert p.flush(30) == 0
    assert p.flush(30) == 0


CLEANING_STEPS = ["cleaning:after-upload", "cleaning:after-swap"]


@pytest.mark.parametrize("step", CLEANING_STEPS)
def test_kill9_at_each_cleaning_step(node_factory: NodeFactory, store: Store, step: str) -> None:
    """A compacted topic's cleaning dies after uploading its cleaned objects, or after
    swapping them in; after a restart the latest value of every key is read at its
    offset, and the store holds exactly what the index names."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    args, env, listed = store
    fast = [*FAST, *args, "--compaction-interval-ms", "200", "--compaction-max-delay-ms", "0"]
    node = node_factory(fast, env={**env, "ZONEGATE_CRASH_AT": step})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    configs = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
    for f in admin.create_topics([NewTopic("keyed", 1, config=configs)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    for u in range(20):
        for k in range(10):
            p.produce("keyed", key=b"k%d" % k, value=b"u%02d-k%d" % (u, k))
        assert p.flush(30) == 0
    # The active segment is never cleaned: only a short segment.ms makes cleaning due.
    entry = ConfigEntry("segment.ms", "200", incremental_operation=AlterConfigOpType.SET)
    res = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "keyed", incremental_configs=[entry])]
    )
    next(iter(res.values())).result(30)
    _dies_at_then_restarts(node, step, env)
    latest = [(190 + k, b"k%d" % k, b"u19-k%d" % k) for k in range(10)]
    wait_until(
        "the latest value of every key only",
        lambda: ck_read_to_end(node.bootstrap, "keyed") == latest,
    )

    _wait_settled(node, listed)
    assert ck_read_to_end(node.bootstrap, "keyed") == latest
