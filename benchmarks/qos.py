"""Produce latency alone and under load, catch-up reads and compaction: QoS on moto's S3.

One `zonegate serve` node process on S3 (moto's server over HTTP), with an
object-store budget (`--qos-get-bytes-per-s`, `--qos-put-bytes-per-s`) and the
default weights and floors, a small block cache (so catch-up reads keep
reaching the store: it holds the two partitions being read, 16 MiB of
readahead each, not the 64 MiB of history) and compaction every 500 ms. First a topic `history` is
written (8 partitions) and compacted into stream objects. Then:

1. produce alone: a confluent-kafka producer writes 1 KiB records at a steady
   rate (acks=all) to topic `live` for `--seconds`; each record's latency is
   the time from `produce()` to its delivery report;
2. the same producer again, while two catch-up consumers (processes of their
   own) read `history` from the start over and over, and compaction rewrites
   what the producer writes: the catch-up MB/s is what they read, and the
   compaction backlog (`zonegate_compaction_backlog_bytes`) is sampled every
   half second.

The last line is exactly
`qos produce p99 ms: alone X, under load Y, ratio R; catch-up MB/s Z; compaction backlog max B MiB`.
Target (issue 16): R <= 1.2, Z at least the catch-up floor of the GET budget, B
bounded (not growing over the run).

    python benchmarks/qos.py [--seconds 20] [--rate-mb 1] [--get-mb 40] [--history-mib 64]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.storage import metric  # noqa: E402
from tests.node_harness import free_port_block, start_node  # noqa: E402
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server  # noqa: E402

BUCKET = "zonegate-qos-bench"
MIB = 1024 * 1024
HISTORY_PARTITIONS = 8
CATCH_UP_FLOOR = 0.10  # the default floor of catch_up_fetch (qos/scheduler.py)


def write_history(bootstrap: str, total: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    payload = os.urandom(1024)
    for i in range(total // len(payload)):
        while True:
            try:
                p.produce("history", payload, partition=i % HISTORY_PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0


def produce_latencies(bootstrap: str, seconds: float, rate_bytes: float) -> list[float]:
    """Latencies (s) of 1 KiB records produced at `rate_bytes` per second for `seconds`."""
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "client.id": "live", "linger.ms": 5, "acks": "all"}
    )
    payload = os.urandom(1024)
    latencies: list[float] = []

    def delivered(sent: float) -> object:
        return lambda err, msg: latencies.append(time.monotonic() - sent) if err is None else None

    every = len(payload) / rate_bytes
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        due = start + n * every
        now = time.monotonic()
        if due > now:
            p.poll(min(due - now, 0.01))
            continue
        p.produce("live", payload, on_delivery=delivered(time.monotonic()))
        n += 1
        p.poll(0)
    assert p.flush(60) == 0
    return latencies


def catch_up_reader(
    bootstrap: str, partitions: list[int], read: Synchronized, stop: object
) -> None:
    """A consumer reading `partitions` of history from the start, one after the other,
    again and again: each read ahead whole stream objects, the cache holds two."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"catch-up-{partitions[0]}",
         "enable.auto.commit": False, "client.id": "catch-up"}
    )  # fmt: skip
    ends = {
        p: c.get_watermark_offsets(TopicPartition("history", p), timeout=30)[1] for p in partitions
    }
    turn = 0
    c.assign([TopicPartition("history", partitions[turn], 0)])
    while not stop.is_set():  # type: ignore[attr-defined]
        for m in c.consume(500, 0.1):
            if m.error() is not None:
                continue
            with read.get_lock():
                read.value += len(m.value() or b"")
            if m.offset() + 1 >= ends[m.partition()]:  # this one is read: the next one
                turn = (turn + 1) % len(partitions)
                c.assign([TopicPartition("history", partitions[turn], 0)])
                break
    c.close()


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate-mb", type=float, default=1.0, help="produce MB/s")
    parser.add_argument("--get-mb", type=float, default=40.0, help="GET budget, MB/s")
    parser.add_argument("--put-mb", type=float, default=40.0, help="PUT budget, MB/s")
    parser.add_argument("--history-mib", type=float, default=64.0)
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    http = free_port_block(1)
    with tempfile.TemporaryDirectory() as tmp, MotoS3Server(default_bucket=BUCKET) as moto:
        node = start_node(
            Path(tmp) / "node",
            [
                "--zones", "zone-a",
                "--object-store", f"s3://{BUCKET}/bench",
                "--s3-endpoint", moto.endpoint_url,
                "--http-port", str(http),
                "--qos-get-bytes-per-s", str(args.get_mb * 1e6),
                "--qos-put-bytes-per-s", str(args.put_mb * 1e6),
                "--block-cache-bytes", str(40 * MIB),
                "--compaction-interval-ms", "500",
                "--compaction-max-delay-ms", "5000",
            ],
            dict(FAKE_AWS_ENV),
        )  # fmt: skip
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            topics = [NewTopic("history", num_partitions=HISTORY_PARTITIONS), NewTopic("live", 1)]
            for f in admin.create_topics(topics).values():
                f.result(30)
            del admin
            write_history(node.bootstrap, int(args.history_mib * MIB))
            start = time.monotonic()
            while metric(http, "zonegate_compaction_backlog_bytes") > 0 or not metric(
                http, "zonegate_compaction_passes_total"
            ):
                time.sleep(0.5)
                if time.monotonic() - start > 600:
                    raise RuntimeError("history was not compacted")
            print(
                f"history: {args.history_mib:.0f} MiB in {HISTORY_PARTITIONS} partitions, compacted"
            )

            alone = produce_latencies(node.bootstrap, args.seconds, args.rate_mb * 1e6)
            print(f"phase 1, produce alone: {len(alone)} records, p99 {1000 * p99(alone):.1f} ms")

            read: Synchronized = multiprocessing.Value("q", 0)  # type: ignore[assignment]
            stop = multiprocessing.Event()
            halves = [list(range(0, HISTORY_PARTITIONS, 2)), list(range(1, HISTORY_PARTITIONS, 2))]
            readers = [
                multiprocessing.Process(
                    target=catch_up_reader, args=(node.bootstrap, h, read, stop)
                )
                for h in halves
            ]
            for r in readers:
                r.start()
            time.sleep(3)  # the readers are reading
            backlog: list[float] = []
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.is_set():
                    backlog.append(metric(http, "zonegate_compaction_backlog_bytes"))
                    time.sleep(0.5)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            waited0 = metric(http, "zonegate_qos_wait_seconds_sum", io_class="produce")
            read_before, t0 = read.value, time.monotonic()
            loaded = produce_latencies(node.bootstrap, args.seconds, args.rate_mb * 1e6)
            catch_up_mbs = (read.value - read_before) / 1e6 / (time.monotonic() - t0)
            sampling.set()
            sampler.join(5)
            stop.set()
            for r in readers:
                r.join(30)
            waits = metric(http, "zonegate_qos_wait_seconds_sum", io_class="produce") - waited0
            print(
                f"phase 2, under load: {len(loaded)} records, p99 {1000 * p99(loaded):.1f} ms; "
                f"catch-up {catch_up_mbs:.1f} MB/s (floor {CATCH_UP_FLOOR * args.get_mb:.1f}); "
                f"compaction backlog samples (MiB) "
                f"{' '.join(f'{b / MIB:.1f}' for b in backlog)}; WAL uploads waited {waits:.3f} s "
                "for grants in all"
            )
        finally:
            if node.alive():
                node.stop()
    a, u = 1000 * p99(alone), 1000 * p99(loaded)
    print(
        f"qos produce p99 ms: alone {a:.1f}, under load {u:.1f}, ratio {u / a:.2f}; "
        f"catch-up MB/s {catch_up_mbs:.1f}; compaction backlog max {max(backlog) / MIB:.1f} MiB"
    )


if __name__ == "__main__":
    main()
