"""The bucket and the metadata store under retention, on moto's S3 server over HTTP.

One `zonegate serve` node process on S3 (moto's server); topics with a short
`retention.ms` take a steady produce rate from a confluent-kafka producer for
several retention periods. Every second it samples: the bucket's WAL and
stream object bytes (LIST), the bytes retention keeps (the batches the index names, SUM(length)),
and the rows of the metadata store (every table). Once retention has been
reached (from the second period on) the bucket should hold about what
retention keeps: whole WAL objects, some a segment's span older than the
newest segment a partition dropped, and objects waiting out
`log.segment.delete.delay.ms` before GC deletes them. The last line is exactly
`retention: bucket MiB X for retained MiB Y, ratio R; metadata rows Z`, X and
Y being the means over the last period, Z the rows at the end.

Each period's line also says where the bucket's bytes beyond what the index
names lie: WAL and stream objects no entry names (waiting out a grace), and the
unnamed bytes of objects still named.

    python benchmarks/retention.py [--retention-s 20] [--periods 5] [--rate-mb 2]
        [--segment-s 1] [--retention-bytes N] [--compaction-max-delay-ms MS]

After the run, the node restarts (cold caches) and a consumer reads the
first topic from its log start: the GETs per MiB that took are printed.

`--retention-bytes` deletes by size (retention.bytes per partition, retention.ms
-1) instead of by time; `--compaction-max-delay-ms` sets the node's bound on
data in WAL objects (with a retention.ms beyond it, compaction rewrites the
data into stream objects before it expires).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.node_harness import RunningNode, free_port_block, start_node  # noqa: E402
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server  # noqa: E402

BUCKET = "zonegate-retention-bench"
MIB = 1024 * 1024


def bucket_objects(client: object, prefix: str) -> dict[str, int]:
    """The size of each object under `prefix`, by its key as the index names it (without
    the store's prefix)."""
    sizes: dict[str, int] = {}
    pages = client.get_paginator("list_objects_v2").paginate(  # type: ignore[attr-defined]
        Bucket=BUCKET, Prefix=prefix
    )
    for page in pages:
        for o in page.get("Contents", []):
            sizes[o["Key"].split("/", 1)[1]] = o["Size"]
    return sizes


def fetch_gets(port: int) -> float:
    """GETs the node made for Fetch (its /metrics), as benchmarks/storage.py counts them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("zonegate_object_store_class_requests_total{")
        and 'op="get"' in line
        and ('io_class="tail_fetch"' in line or 'io_class="catch_up_fetch"' in line)
    )


def catch_up(node: RunningNode, http: int, topic: str, partitions: int) -> tuple[int, float]:
    """A consumer reads the topic's partitions from their log start to their ends, on the
    node restarted (cold caches): (bytes of values, GETs)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    node.stop()
    node.restart()
    c = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": "catch-up",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",  # the start may move on while it reads
        }
    )
    parts = [TopicPartition(topic, p) for p in range(partitions)]
    ends = {tp.partition: c.get_watermark_offsets(tp, timeout=30)[1] for tp in parts}
    gets = fetch_gets(http)
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    left = {p for p, end in ends.items() if end > 0}
    read = 0
    deadline = time.monotonic() + 120
    while left and time.monotonic() < deadline:
        for m in c.consume(1000, 0.05):
            if m.error() is None:
                read += len(m.value() or b"")
                if m.offset() + 1 >= ends[m.partition()]:
                    left.discard(m.partition())
    c.close()
    return read, fetch_gets(http) - gets


def store_figures(db_path: Path) -> tuple[dict[str, int], int]:
    """(bytes the index names in each object, rows in all tables) of the metadata store."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        named = {
            str(k): int(n)
            for k, n in db.execute(
                "SELECT object_key, SUM(length) FROM stream_index GROUP BY object_key"
            )
        }
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = sum(db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables)
        return named, int(rows)
    finally:
        db.close()


class Sample(NamedTuple):
    """One second's figures, in bytes: the bucket, what the index names, and where the
    bucket's bytes beyond what the index names lie."""

    t: float
    bucket: int
    named: int
    rows: int
    unnamed_wal: int  # WAL objects no entry names (waiting out a grace)
    unnamed_streams: int  # stream objects no entry names
    dead_wal: int  # the bytes no entry names of WAL objects still named
    dead_streams: int  # the bytes no entry names of stream objects still named


def sample(t: float, objects: dict[str, int], named: dict[str, int], rows: int) -> Sample:
    out = {"unnamed_wal": 0, "unnamed_streams": 0, "dead_wal": 0, "dead_streams": 0}
    for key, size in objects.items():
        kind = "wal" if key.startswith("wal/") else "streams"
        if key not in named:
            out[f"unnamed_{kind}"] += size
        else:
            out[f"dead_{kind}"] += max(0, size - named[key])
    return Sample(t, sum(objects.values()), sum(named.values()), rows, **out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--retention-s", type=float, default=20.0)
    parser.add_argument("--segment-s", type=float, default=1.0)
    parser.add_argument("--periods", type=int, default=5)
    parser.add_argument("--rate-mb", type=float, default=2.0, help="MB/s produced")
    parser.add_argument("--topics", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--retention-bytes", type=int, default=-1, help="per partition")
    parser.add_argument("--compaction-max-delay-ms", type=int, default=None)
    args = parser.parse_args()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    retention_ms = int(args.retention_s * 1000)
    http = free_port_block(1)
    with tempfile.TemporaryDirectory() as tmp, MotoS3Server(default_bucket=BUCKET) as moto:
        node = start_node(
            Path(tmp) / "node",
            [
                "--zones",
                "zone-a",
                "--object-store",
                f"s3://{BUCKET}/bench",
                "--s3-endpoint",
                moto.endpoint_url,
                "--log-retention-check-interval-ms",
                "500",
                "--gc-interval-ms",
                "1000",
                "--log-segment-delete-delay-ms",
                "1000",
                "--gc-orphan-grace-ms",
                "5000",
                "--http-port",
                str(http),
                *(
                    ["--compaction-max-delay-ms", str(args.compaction_max_delay_ms)]
                    if args.compaction_max_delay_ms is not None
                    else []
                ),
            ],
            dict(FAKE_AWS_ENV),
        )
        client = moto.client()
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            topics = [f"short-{i}" for i in range(args.topics)]
            configs = {
                "retention.ms": str(retention_ms if args.retention_bytes < 0 else -1),
                "retention.bytes": str(args.retention_bytes),
                "segment.ms": str(int(args.segment_s * 1000)),
            }
            futures = admin.create_topics(
                [NewTopic(t, num_partitions=args.partitions, config=configs) for t in topics]
            )
            for f in futures.values():
                f.result(30)
            p = Producer(
                {"bootstrap.servers": node.bootstrap, "linger.ms": 5, "enable.idempotence": True}
            )
            payload = os.urandom(1024)
            per_tick = max(1, int(args.rate_mb * 1_000_000 / len(payload) / 100))  # 10 ms ticks
            samples: list[Sample] = []
            start = time.monotonic()
            duration = args.retention_s * args.periods
            next_sample = start + 1.0
            i = 0
            while (now := time.monotonic()) - start < duration:
                for _ in range(per_tick):
                    while True:
                        try:
                            p.produce(topics[i % len(topics)], payload)
                            break
                        except BufferError:
                            p.poll(0.01)
                    i += 1
                p.poll(0)
                if now >= next_sample:
                    named, rows = store_figures(node.data_dir / "meta.db")
                    objects = bucket_objects(client, "bench/wal/")
                    objects.update(bucket_objects(client, "bench/streams/"))
                    samples.append(sample(now - start, objects, named, rows))
                    next_sample += 1.0
                time.sleep(max(0.0, start + (i / per_tick) * 0.01 - time.monotonic()))
            assert p.flush(60) == 0
            produced = i * len(payload)
            read, gets = catch_up(node, http, topics[0], args.partitions)
        finally:
            node.stop()
    for period in range(args.periods):
        chunk = [
            s
            for s in samples
            if period * args.retention_s <= s[0] < (period + 1) * args.retention_s
        ]
        if chunk:

            def mib(field: str, chunk: list[Sample] = chunk) -> str:
                return f"{statistics.mean(getattr(s, field) for s in chunk) / MIB:.1f}"

            print(
                f"period {period + 1}: bucket MiB {mib('bucket')}, "
                f"retained MiB {mib('named')}, "
                f"metadata rows {min(s.rows for s in chunk)}-{max(s.rows for s in chunk)}; "
                f"beyond retained: WAL objects unnamed {mib('unnamed_wal')} "
                f"and partly named {mib('dead_wal')}, stream objects unnamed "
                f"{mib('unnamed_streams')} and partly named {mib('dead_streams')}"
            )
    print(f"produced MiB {produced / MIB:.1f} in {duration:.0f} s ({len(samples)} samples)")
    print(
        f"catch-up from the log start, cold caches: {read / MIB:.1f} MiB of "
        f"{topics[0]} with {gets:.0f} GETs, {gets / max(read / MIB, 1e-9):.3f} GETs per MiB"
    )
    last = [s for s in samples if s[0] >= (args.periods - 1) * args.retention_s]
    bucket = statistics.mean(s.bucket for s in last)
    retained = statistics.mean(s.named for s in last)
    rows = samples[-1].rows
    print(
        f"retention: bucket MiB {bucket / MIB:.1f} for retained MiB {retained / MIB:.1f}, "
        f"ratio {bucket / retained:.2f}; metadata rows {rows}"
    )


if __name__ == "__main__":
    main()
