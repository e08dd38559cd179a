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

Then the S3 requests of the whole run, from the usage records the node wrote
(by purpose, priced at S3 Standard's request prices), against what the cost
model (cost_model/s3_requests.py) predicts from the run's workload: bytes
produced per partition, produce time, the producer's batch size (librdkafka's
batch.size, 1,000,000: one batch per ProduceRequest here) and its in-flight
window (5 requests, idempotent, and measured here at most one per partition),
the node's settings and the reads made. The
producer sends as fast as it is acknowledged, so its window, not the PUT time,
sets the WAL objects' size (docs/cost-model.md, "WAL objects").

The line before last is exactly
`catch-up GETs per MiB: zonegate X (before compaction Y), read MB/s Z`, X and Z
after compaction. Target (issue 15): X <= 0.125 (one GET per 8 MiB), Z at
least the produce MB/s. The last line is exactly
`s3 request cost: model X USD, from usage records Y USD, ratio R` (R = X / Y;
target, issue 29: 0.9 <= R <= 1.1).

First (unless `--no-slow-writes`), a day of slow writes on an injected clock
(benchmarks/slow_writes.py): the stream objects and index rows a slowly written
partition keeps with small objects merged and without.

    python benchmarks/storage.py [--partition-mib 24] [--partitions 8]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import slow_writes  # noqa: E402
from tests.node_harness import RunningNode, free_port_block, start_node  # noqa: E402
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server  # noqa: E402
from zonegate.cost_model import price_table  # noqa: E402
from zonegate.cost_model.s3_requests import (  # noqa: E402
    ByPurpose,
    Requests,
    WalSealing,
    range_gets,
    stream_object_puts,
    stream_reads,
    wal_objects,
)

BUCKET = "zonegate-storage-bench"
TOPIC = "history"
MIB = 1024 * 1024
HELD_OFF = ["--stream-object-bytes", str(1 << 40), "--compaction-max-delay-ms", str(10**12)]
COMPACTING = ["--compaction-interval-ms", "500", "--compaction-max-delay-ms", "1000"]
# The node's defaults and the client's the model needs (broker/settings.py, librdkafka).
SEAL_BYTES = 8 * MIB
STREAM_OBJECT_BYTES = 16 * MIB
PRODUCER_BATCH_BYTES = 1_000_000  # librdkafka's batch.size
# librdkafka's own limit for an idempotent producer, stated so the model's input is
# visible here: requests it keeps unacknowledged on its one connection. Measured
# here, it also keeps at most one per partition (one request a batch): 2 partitions
# seal objects of 1 request, 4 of 2, 8 and 16 of 2.4 (docs/cost-model.md, "WAL
# objects"; librdkafka's own per-partition limit is 5, the cause is not traced).
PRODUCER_IN_FLIGHT = 5
PROBE_INTERVAL_S = 5.0  # broker/node.py: the object store's health probe
READ_PARTITIONS = 2


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


def fetch_gets(port: int) -> float:
    """GETs the node made for Fetch and ListOffsets (not its health probes or GC)."""
    return sum(
        metric(port, "zonegate_object_store_class_requests_total", op="get", io_class=c)
        for c in ("tail_fetch", "catch_up_fetch")
    )


def cpu_seconds(node: RunningNode) -> float:
    assert node.proc is not None
    fields = Path(f"/proc/{node.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, partitions: int, per_partition: int) -> tuple[float, float]:
    """Writes `per_partition` bytes of 1 KiB records into each partition: (MB/s, s)."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "max.in.flight.requests.per.connection": PRODUCER_IN_FLIGHT,
        }
    )
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
    seconds = time.monotonic() - start
    return count * partitions * len(payload) / 1e6 / seconds, seconds


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
        # Small batches with a short wait: consume() waits out its timeout for a batch
        # it cannot fill, which would be counted as reading time.
        for m in c.consume(1000, 0.05):
            if m.error() is not None:
                raise RuntimeError(m.error())
            read += len(m.value() or b"")
            if m.offset() + 1 >= ends[m.partition()]:
                left.discard(m.partition())
        if time.monotonic() - start > 600:
            raise RuntimeError(f"catch-up did not finish; left {sorted(left)}")
    seconds = time.monotonic() - start  # when the last record arrived
    c.close()
    return read, seconds


def measured_read(node: RunningNode, http: int, label: str) -> tuple[float, float]:
    """A cold catch-up read of 2 partitions: (GETs per MiB, MB/s)."""
    gets_before = fetch_gets(http)
    read, seconds = catch_up(node.bootstrap, [0, 1])
    gets = fetch_gets(http) - gets_before

    per_mib = gets / (read / MIB)
    mbs = read / 1e6 / seconds
    print(
        f"{label}: read {read / MIB:.1f} MiB of 2 partitions in {seconds:.1f} s "
        f"({mbs:.1f} MB/s) with {gets:.0f} GETs: {per_mib:.3f} GETs per MiB"
    )
    return per_mib, mbs


class Lives:
    """How long each node process lived (the usage records and GC run on timers)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._since = time.monotonic()

    def stop(self, node: RunningNode) -> None:
        node.stop()
        self.seconds.append(time.monotonic() - self._since)

    def restart(self, node: RunningNode) -> None:
        self.stop(node)
        node.restart()
        self._since = time.monotonic()


@dataclass(frozen=True)
class Run:
    partitions: int
    partition_bytes: float
    produce_s: float
    upload_s: float
    lives: list[float]


def predicted_requests(run: Run) -> ByPurpose:
    """What the cost model says this run's node asked of S3, by purpose."""
    out = ByPurpose()
    total = run.partition_bytes * run.partitions
    # The producer fills its batches (it writes faster than the node acknowledges),
    # one batch per request: a partition's data is this many requests.
    requests = run.partitions * math.ceil(run.partition_bytes / PRODUCER_BATCH_BYTES)
    sealing = WalSealing(
        seal_bytes=SEAL_BYTES,
        seal_age_s=0.25,
        put_s=run.upload_s,
        request_bytes=total / requests,
        window_requests=min(PRODUCER_IN_FLIGHT, run.partitions),
    )
    wal = wal_objects(total, run.produce_s, nodes=1, sealing=sealing)
    out.add("wal", Requests(puts=wal))
    per_partition = range_gets(run.partition_bytes, PRODUCER_BATCH_BYTES, wal)
    # Two partitions read cold from the WAL objects, then all of them compacted into
    # stream objects, then two read cold from those (the warm read GETs nothing).
    out.add("tail_read", Requests(gets=READ_PARTITIONS * per_partition))
    out.add(
        "compaction",
        Requests(
            puts=run.partitions * stream_object_puts(run.partition_bytes, STREAM_OBJECT_BYTES),
            gets=run.partitions * per_partition,
        ),
    )
    out.add("catch_up_read", Requests(gets=READ_PARTITIONS * stream_reads(run.partition_bytes)))
    # Each start PUTs the health probe's object, then GETs a byte of it every 5 s;
    # a usage object's own PUT is counted by the next flush (every 60 s), and GC
    # LISTs the WAL, stream and usage prefixes every 60 s, and once more as soon as
    # compaction has rewritten data (maintenance/jobs.py wakes it).
    probes = sum(math.floor(s / PROBE_INTERVAL_S) for s in run.lives)
    out.add("housekeeping", Requests(puts=len(run.lives), gets=probes))
    minutes = sum(math.floor(s / 60) for s in run.lives)
    out.add("usage_records", Requests(puts=minutes))
    out.add("gc", Requests(lists=3 * (minutes + 1)))
    return out


def recorded_requests(endpoint: str) -> dict[str, dict[str, int]]:
    """S3 requests by purpose, as the node's usage records counted them."""
    from zonegate.analytics.facts import arrow_facts
    from zonegate.analytics.source import locate
    from zonegate.analytics.tables import s3_by_purpose
    from zonegate.cost_model import price_table, usage_rates

    facts = arrow_facts(locate(f"s3://{BUCKET}/bench", endpoint))
    rows = s3_by_purpose(facts, usage_rates(price_table("aws", "us-east-1")))
    return {r.pop("purpose"): r for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partition-mib", type=float, default=24.0)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--no-slow-writes",
        action="store_true",
        help="leave out the day of slow writes on an injected clock (benchmarks/slow_writes.py)",
    )
    args = parser.parse_args()
    if not args.no_slow_writes:
        # Objects and index rows a slowly written partition keeps, merged and not (issue 31).
        print(slow_writes.summary())
    os.environ.update(FAKE_AWS_ENV)  # for reading the usage records from moto
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
        lives = Lives()
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            for f in admin.create_topics(
                [NewTopic(TOPIC, num_partitions=args.partitions)]
            ).values():
                f.result(30)
            del admin  # its connection would complain through every restart
            produce_mbs, produce_s = produce(
                node.bootstrap, args.partitions, int(args.partition_mib * MIB)
            )
            # The workload as the node saw it: the bytes it wrote to WAL objects, and
            # how long one upload took (shown beside the objects it sealed).
            wal_bytes = metric(
                http, "zonegate_object_store_class_bytes_total", op="put", io_class="produce"
            )
            upload_s = metric(http, "zonegate_object_store_latency_seconds_sum", op="put") / max(
                metric(http, "zonegate_object_store_latency_seconds_count", op="put"), 1
            )
            wal_puts = metric(
                http, "zonegate_object_store_class_requests_total", op="put", io_class="produce"
            )
            print(
                f"produce: {args.partitions} partitions x {args.partition_mib:.0f} MiB at "
                f"{produce_mbs:.1f} MB/s; {wal_puts:.0f} WAL objects of "
                f"{wal_bytes / max(wal_puts, 1) / MIB:.2f} MiB, one every "
                f"{produce_s / max(wal_puts, 1) * 1000:.1f} ms, mean PUT {upload_s * 1000:.1f} ms; "
                f"load average {os.getloadavg()[0]:.2f}"
            )
            lives.restart(node)  # cold caches
            before, before_mbs = measured_read(node, http, "before compaction")

            node.args = [*base, *COMPACTING]
            lives.restart(node)
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
            lives.restart(node)  # cold caches
            after, after_mbs = measured_read(node, http, "after compaction")
            measured_read(node, http, "after compaction, warm block cache")
        finally:
            if node.alive():
                lives.stop(node)
        print(f"produce MB/s {produce_mbs:.1f}; read MB/s before compaction {before_mbs:.1f}")
        print(
            f"catch-up GETs per MiB: zonegate {after:.3f} (before compaction {before:.3f}), "
            f"read MB/s {after_mbs:.1f}"
        )
        recorded = recorded_requests(moto.endpoint_url)
    run = Run(
        partitions=args.partitions,
        partition_bytes=wal_bytes / args.partitions,
        produce_s=produce_s,
        upload_s=upload_s,
        lives=lives.seconds,
    )
    model = predicted_requests(run)
    s3 = price_table("aws", "us-east-1").object_storage("standard")
    for purpose in sorted(set(model.purposes) | set(recorded)):
        m = model.purposes.get(purpose, Requests())
        r = recorded.get(purpose, {})
        print(
            f"s3 requests, {purpose}: model {m.puts:.0f} PUT {m.gets:.0f} GET {m.lists:.0f} LIST, "
            f"usage records {r.get('put_requests', 0)} PUT {r.get('get_requests', 0)} GET "
            f"{r.get('list_requests', 0)} LIST"
        )
    predicted = model.usd(s3)
    measured = sum(float(r["request_usd"]) for r in recorded.values())
    print(
        f"s3 request cost: model {predicted:.6f} USD, from usage records {measured:.6f} USD, "
        f"ratio {predicted / measured:.3f}"
    )


if __name__ == "__main__":
    main()
