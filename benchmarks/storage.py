"""Catch-up reads before and after compaction, on moto's S3 server over HTTP.

One `zonegate serve` node process on S3 (moto's server). A confluent-kafka
producer writes a topic of 8 partitions (24 MiB each by default) as fast as it
can: its MB/s is the produce rate of the run. Compaction is held off (huge
`--stream-object-bytes` and `--compaction-max-delay-ms`), so the data stays in
the WAL objects it was written to. Then, each time on a freshly restarted node
(cold log and block caches), a confluent-kafka consumer with the client's
default fetch sizes reads 2 of the 8 partitions from the beginning; the GETs
it cost are read from the node's /metrics:

1. before compaction: from the WAL objects, every one of which holds a slice
   of all 8 partitions;
2. the node restarts with compaction on and rewrites every partition into
   stream objects (throughput, and the node's CPU seconds for it);
3. after compaction: from the stream objects.

The last line is exactly
`catch-up GETs per MiB: zonegate X (before compaction Y), read MB/s Z`, X and Z
after compaction. Target (issue 15): X <= 0.125 (one GET per 8 MiB), Z at
least the produce MB/s.

    python benchmarks/storage.py [--partition-mib 24] [--partitions 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.node_harness import RunningNode, free_port_block, start_node  # noqa: E402
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server  # noqa: E402

BUCKET = "zonegate-storage-bench"
TOPIC = "history"
MIB = 1024 * 1024
HELD_OFF = ["--stream-object-bytes", str(1 << 40), "--compaction-max-delay-ms", str(10**12)]
COMPACTING = ["--compaction-interval-ms", "500", "--compaction-max-delay-ms", "1000"]


def metric(port: int, name: str, **labels: str) -> float:
    """The sum of a /metrics family's samples whose labels include `labels`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def cpu_seconds(node: RunningNode) -> float:
    assert node.proc is not None
    fields = Path(f"/proc/{node.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, partitions: int, per_partition: int) -> float:
    """Writes `per_partition` bytes of 1 KiB records into each partition; MB/s."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    payload = os.urandom(1024)
    count = per_partition // len(payload)
    start = time.monotonic()
    for i in range(count):
        for part in range(partitions):
            while True:
                try:
                    p.produce(TOPIC, payload, partition=part)
                    break
                except BufferError:
                    p.poll(0.01)
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return count * partitions * len(payload) / 1e6 / (time.monotonic() - start)


def catch_up(bootstrap: str, partitions: list[int]) -> tuple[int, float]:
    """Reads the partitions from offset 0 to their ends: (bytes of values, seconds)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "catch-up", "enable.auto.commit": False}
    )
    ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in partitions}
    c.assign([TopicPartition(TOPIC, p, 0) for p in partitions])
    left = set(partitions)
    read = 0
    start = time.monotonic()
    while left:
        for m in c.consume(10_000, 1.0):
            if m.error() is not None:
                raise RuntimeError(m.error())
            read += len(m.value() or b"")
            if m.offset() + 1 >= ends[m.partition()]:
                left.discard(m.partition())
        if time.monotonic() - start > 600:
            raise RuntimeError(f"catch-up did not finish; left {sorted(left)}")
    seconds = time.monotonic() - start
    c.close()
    return read, seconds


def measured_read(node: RunningNode, http: int, label: str) -> tuple[float, float]:
    """A cold catch-up read of 2 partitions: (GETs per MiB, MB/s)."""
    gets_before = metric(http, "zonegate_object_store_requests_total", op="get")
    read, seconds = catch_up(node.bootstrap, [0, 1])
    gets = metric(http, "zonegate_object_store_requests_total", op="get") - gets_before
    per_mib = gets / (read / MIB)
    mbs = read / 1e6 / seconds
    print(
        f"{label}: read {read / MIB:.1f} MiB of 2 partitions in {seconds:.1f} s "
        f"({mbs:.1f} MB/s) with {gets:.0f} GETs: {per_mib:.3f} GETs per MiB"
    )
    return per_mib, mbs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partition-mib", type=float, default=24.0)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    http = free_port_block(1)
    with tempfile.TemporaryDirectory() as tmp, MotoS3Server(default_bucket=BUCKET) as moto:
        base = [
            "--zones",
            "zone-a",
            "--object-store",
            f"s3://{BUCKET}/bench",
            "--s3-endpoint",
            moto.endpoint_url,
            "--http-port",
            str(http),
        ]
        node = start_node(Path(tmp) / "node", [*base, *HELD_OFF], dict(FAKE_AWS_ENV))
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            for f in admin.create_topics(
                [NewTopic(TOPIC, num_partitions=args.partitions)]
            ).values():
                f.result(30)
            produce_mbs = produce(node.bootstrap, args.partitions, int(args.partition_mib * MIB))
            print(
                f"produce: {args.partitions} partitions x {args.partition_mib:.0f} MiB at "
                f"{produce_mbs:.1f} MB/s"
            )
            node.stop()
            node.restart()  # cold caches
            before, before_mbs = measured_read(node, http, "before compaction")

            node.stop()
            node.args = [*base, *COMPACTING]
            node.restart()
            start, cpu0 = time.monotonic(), cpu_seconds(node)
            while True:
                time.sleep(0.5)
                backlog = metric(http, "zonegate_compaction_backlog_bytes")
                passes = metric(http, "zonegate_compaction_passes_total")
                if backlog == 0 and passes > 0:
                    break
                if time.monotonic() - start > 900:
                    raise RuntimeError(f"compaction did not finish: backlog {backlog:.0f} B")
            seconds, cpu = time.monotonic() - start, cpu_seconds(node) - cpu0
            compacted = metric(http, "zonegate_compaction_bytes_total")
            print(
                f"compaction: {compacted / MIB:.1f} MiB into "
                f"{metric(http, 'zonegate_compaction_objects_total'):.0f} stream objects in "
                f"{seconds:.1f} s ({compacted / 1e6 / seconds:.1f} MB/s), "
                f"node CPU {cpu:.1f} s ({cpu / (compacted / MIB):.3f} CPU s per MiB)"
            )
            node.stop()
            node.restart()  # cold caches
            after, after_mbs = measured_read(node, http, "after compaction")
        finally:
            if node.alive():
                node.stop()
    print(f"produce MB/s {produce_mbs:.1f}; read MB/s before compaction {before_mbs:.1f}")
    print(
        f"catch-up GETs per MiB: zonegate {after:.3f} (before compaction {before:.3f}), "
        f"read MB/s {after_mbs:.1f}"
    )


if __name__ == "__main__":
    main()
