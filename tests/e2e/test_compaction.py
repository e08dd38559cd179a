"""Compaction into stream objects, seen by real clients on real nodes (issue 15).

A node with small stream objects and a short delay rewrites what producers
wrote into stream objects while they write; every client then reads every
record once, in order, with its key, value, headers and timestamp, from the
stream objects; the index holds a few rows per partition however many batches
were written; and when the partition's leader is killed in the middle of a
compaction, its successor compacts again and nothing is lost or duplicated.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cluster_harness import ClusterNode, start_cluster
from tests.e2e.clients import (
    Consumed,
    aio_consume,
    ck_consume,
    ck_create_topic,
    ck_produce,
    kp_consume,
    wait_until,
)
from tests.e2e.conftest import InProcessFactory
from tests.e2e.records_fixture import make_records
from zonegate.storage.stream_objects import is_stream_key

pytestmark = pytest.mark.e2e

COMPACT_FAST = [
    "--compaction-interval-ms",
    "100",
    "--stream-object-bytes",
    "65536",
    "--compaction-max-delay-ms",
    "300",
]


def _rows(db_path: Path) -> dict[int, tuple[int, int]]:
    """stream id -> (index rows in stream objects, in WAL objects)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        rows = db.execute("SELECT stream_id, object_key FROM stream_index").fetchall()
    finally:
        db.close()
    out: dict[int, tuple[int, int]] = {}
    for sid, key in rows:
        s, w = out.get(sid, (0, 0))
        out[sid] = (s + 1, w) if is_stream_key(key) else (s, w + 1)
    return out


def _as_sent(consumed: list[Consumed]) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return sorted((c.partition, c.offset, c.key, c.value) for c in consumed)


def test_every_client_reads_compacted_partitions_and_rows_stay_few(
    inprocess_factory: InProcessFactory,
) -> None:
    # Objects by size only (no delay): what compaction leaves is a few rows per object.
    node = inprocess_factory(
        ["--zones", "zone-a", "--compaction-interval-ms", "100", "--stream-object-bytes", "65536"]
    )
    ck_create_topic(node.bootstrap, "compacted", 3)
    recs = make_records(6000, "c")
    # One record per batch: 6,000 WAL index entries before compaction.
    offsets = ck_produce(
        node.bootstrap,
        "compacted",
        recs,
        3,
        extra={"linger.ms": 0, "batch.num.messages": 1},
    )
    db = node.data_dir / "meta.db"

    def bytes_by_kind() -> tuple[int, int, int]:
        """(bytes in stream objects, in WAL objects, in the fullest partition's WAL)."""
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            rows = c.execute("SELECT stream_id, object_key, length FROM stream_index").fetchall()
        finally:
            c.close()
        streams = sum(n for _, k, n in rows if is_stream_key(k))
        wal: dict[int, int] = {}
        for sid, k, n in rows:
            if not is_stream_key(k):
                wal[sid] = wal.get(sid, 0) + n
        return streams, sum(wal.values()), max(wal.values(), default=0)

    # What is left in WAL objects is less than an object's worth in every partition (a
    # total under three objects' worth could still be one partition's backlog).
    wait_until("compaction to catch up", lambda: bytes_by_kind()[2] < 65536, 60)
    rows = _rows(db)
    streamed, left, _ = bytes_by_kind()
    stream_rows = sum(s for s, _ in rows.values())
    # One row per object of about 64 KiB (a chunk each), not one per batch.
    assert 0 < stream_rows <= streamed // 60_000 + 3, (rows, streamed)
    leader = node.nodes[0].local_leader
    for sid in rows:
        _, tail = node.call(leader.changes.tail(sid))
        assert sum(e.length for e in tail) < 65536

    expected = sorted((p, o, r.key, r.value) for (p, o), r in zip(offsets, recs, strict=True))
    counts = {p: sum(1 for q, _ in offsets if q == p) for p in range(3)}
    for consume in (ck_consume, kp_consume, aio_consume):
        got = consume(node.bootstrap, "compacted", counts)
        assert _as_sent(got) == expected, consume.__name__
        by_offset = {(c.partition, c.offset): c for c in got}
        for (p, o), r in zip(offsets, recs, strict=True):
            c = by_offset[(p, o)]
            assert c.timestamp_ms == r.timestamp_ms
            assert c.headers == tuple((k, v) for k, v in r.headers), consume.__name__


def test_a_leader_killed_during_compaction_is_succeeded_without_loss(tmp_path: Path) -> None:
    """The partition's leader dies right after uploading a stream object (before its
    swap); another node leads it next, compacts it again with its own epoch, and every
    acknowledged record is read once; the dead leader's object goes by GC."""
    from confluent_kafka import Producer

    gc = [
        "--gc-orphan-grace-ms",
        "1000",
        "--gc-interval-ms",
        "200",
        "--log-segment-delete-delay-ms",
        "0",
    ]
    cluster = start_cluster(tmp_path / "c", ["zone-a"], 1, gc)
    try:
        first = cluster.nodes[0]
        ck_create_topic(first.bootstrap, "moving", 1)
        p = Producer({"bootstrap.servers": first.bootstrap, "enable.idempotence": True})
        for i in range(2000):
            p.produce("moving", value=b"m%05d" % i)
            if i % 100 == 99:
                p.poll(0)
        assert p.flush(30) == 0
        del p
        db = cluster.root / "meta.db"
        assert _rows(db) and all(s == 0 for s, _ in _rows(db).values())  # not compacted
        # The only node (it keeps leading the partition) comes back compacting at once,
        # and dies at its first upload.
        first.stop()
        first.args = [*first.args, *COMPACT_FAST]
        first.env = {"ZONEGATE_CRASH_AT": "compaction:after-upload"}
        first.start()
        assert first.proc is not None
        assert first.proc.wait(60) == 137
        assert "killed at compaction:after-upload" in first.log_path.read_text()
        objects = cluster.root / "objects" / "streams"
        orphans = {f for f in objects.rglob("*") if f.is_file()}
        assert orphans, "the dead leader's upload"
        # A second node takes the partition once the dead one's lease is out.
        second = ClusterNode(
            2,
            "zone-a",
            [a.replace("node-1", "node-2") if "node-1" in a else a for a in first.args],
            cluster.root / "node-2.log",
        )
        i = second.args.index("--node-id")
        second.args[i + 1] = "2"
        cluster.nodes.append(second)
        second.start()

        def leader_node() -> int:
            c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
            try:
                return int(c.execute("SELECT leader_node FROM partitions").fetchone()[0])
            finally:
                c.close()

        wait_until("the partition on the second node", lambda: leader_node() == 2, 30)
        wait_until(
            "the partition in stream objects",
            lambda: all(w == 0 for _, w in _rows(db).values()),
            30,
        )
        got = ck_consume(second.bootstrap, "moving", {0: 2000})
        assert [(c.offset, c.value) for c in got] == [(i, b"m%05d" % i) for i in range(2000)]

        def only_named() -> bool:
            c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
            try:
                named = {k for (k,) in c.execute("SELECT DISTINCT object_key FROM stream_index")}
            finally:
                c.close()
            on_disk = {
                str(f.relative_to(objects.parent)) for f in objects.rglob("*") if f.is_file()
            }
            return on_disk == {k for k in named if is_stream_key(k)}

        wait_until("the orphan stream object deleted", only_named, 30)
        assert not (orphans & {f for f in objects.rglob("*") if f.is_file()})
    finally:
        cluster.stop()
