"""Many partitions on one node: create, Metadata, one record to each, read all back, RSS.

One zonegate node as a new user runs it (`zonegate serve --zones zone-a`: the
embedded default, a local-directory object store and a SQLite metadata store
under its data directory) gets N partitions in two shapes, each on a fresh node:

- one topic of N partitions: created with CreateTopics at Kafka's limit of
  10,000 partitions per request, then grown with CreatePartitions, 10,000 at a
  time (what Apache Kafka 4.3.1 asks of its users too: a larger request gets
  POLICY_VIOLATION, docs/compatibility.md);
- many topics of `--per-topic` partitions each (1,000 x 100 for N = 100,000),
  created 10,000 partitions per CreateTopics request.

Then, timed: Metadata for all topics (AdminClient.list_topics, the median of
three after one untimed), produce one 100-byte record to every partition (one aiokafka
producer, acks=all, `linger_ms` 20, 5,000 partitions at a time, so a ProduceRequest
carries 5,000 partitions as the Java client's 1 MiB requests would; every send
awaited), and read every record back
(one consumer `assign`ed every partition at offset 0, polling until it holds N
records). RSS is the node process's resident set (VmRSS) after the read and 30 s
of idling, and its peak (VmHWM). The node's own CPU seconds are printed for each
phase, idling included (its storage jobs' passes), as they hold on a busy
machine where wall times do not. Every figure depends on the machine's load: the load average is
printed beside them.

    python benchmarks/partitions.py [--partitions 100000] [--per-topic 100] [--shape both]

The last line is exactly `partitions: N, metadata ms X, produce-all s Y,
read-all s Z, RSS MiB W` (the one-topic shape's figures; RSS the larger of the
two shapes').
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Kafka's controller refuses a CreateTopics or CreatePartitions request that makes
# more than this many partitions (QuorumController.MAX_RECORDS_PER_USER_OP).
PER_REQUEST = 10_000
RECORD = b"x" * 100
# On a machine this busy a request on 100,000 partitions can take minutes of wall time
# (the node gets a small share of a core): librdkafka's 60 s would cut it. Its 10 s for
# a new connection's ApiVersions would too, while the node encodes a 100,000-partition
# Metadata or Fetch answer for another connection (seconds of CPU on one loop): the
# client then drops the connection and asks again, and the node answers the dropped
# ones' Metadata requests for nothing.
SLOW = {
    "socket.timeout.ms": 300_000,
    "api.version.request.timeout.ms": 300_000,
    "socket.connection.setup.timeout.ms": 300_000,
}
IDLE_S = 30
# Partitions sent a record at once, each lot awaited before the next: aiokafka puts every
# ready partition of a node in one ProduceRequest, with no cap on its size; the Java
# client caps a request at max.request.size (1 MiB: about 5,000 of these records).
PER_PRODUCE = 5_000


class Figures(NamedTuple):
    shape: str
    create_s: float
    metadata_ms: float
    produce_s: float
    read_s: float
    rss_mib: float
    peak_mib: float
    cpu: dict[str, float]  # the node's CPU seconds per phase


def _cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used so far (Linux /proc): a figure
    that holds on a busy machine, where the wall times do not."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def _check(futures: dict[str, Any]) -> None:
    for f in futures.values():
        f.result(600)


def create_one_topic(admin: Any, total: int) -> list[tuple[str, int]]:
    from confluent_kafka.admin import NewPartitions, NewTopic

    first = min(total, PER_REQUEST)
    _check(admin.create_topics([NewTopic("big", first, 1)], request_timeout=600))
    have = first
    while have < total:
        have = min(total, have + PER_REQUEST)
        _check(admin.create_partitions([NewPartitions("big", have)], request_timeout=600))
    return [("big", total)]


def create_many_topics(admin: Any, total: int, per_topic: int) -> list[tuple[str, int]]:
    from confluent_kafka.admin import NewTopic

    names = [f"t{i:05d}" for i in range(total // per_topic)]
    step = max(1, PER_REQUEST // per_topic)
    for i in range(0, len(names), step):
        batch = [NewTopic(n, per_topic, 1) for n in names[i : i + step]]
        _check(admin.create_topics(batch, request_timeout=600))
    return [(n, per_topic) for n in names]


def metadata_ms(bootstrap: str, expect: int) -> float:
    """The median of three Metadata requests for all topics (one client, after one
    untimed request that connects it and learns the broker)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, **SLOW})
    admin.list_topics(timeout=900)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        md = admin.list_topics(timeout=900)
        times.append((time.perf_counter() - start) * 1000)
        seen = sum(len(t.partitions) for t in md.topics.values() if not t.topic.startswith("__"))
        if seen != expect:
            raise RuntimeError(f"Metadata listed {seen} partitions, not {expect}")
    return statistics.median(times)


def produce_all(bootstrap: str, topics: list[tuple[str, int]]) -> float:
    return asyncio.run(_produce_all(bootstrap, topics))


async def _produce_all(bootstrap: str, topics: list[tuple[str, int]]) -> float:
    """One record to every partition with aiokafka, as Kafka's Java producer sends: one
    ProduceRequest per node carries every partition with a batch ready (up to
    `max_request_size`). librdkafka sends a request per partition and its broker thread
    walks all of a topic's partitions at each wake-up (each answer), whether they hold
    records or not: at 100,000 partitions it spent minutes of its own CPU on that walk
    while the node idled (docs/benchmarks.md)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=20,
        request_timeout_ms=SLOW["socket.timeout.ms"],
        metadata_max_age_ms=600_000,
    )
    await producer.start()
    # aiokafka asks its metadata for the set of a topic's partitions twice per send, and
    # builds that set anew each time: O(partitions) per record, hours of the client's CPU
    # at 100,000. The topics are known and do not change here: the sets are built once.
    cluster = producer.client.cluster
    known = {name: frozenset(range(count)) for name, count in topics}
    every = cluster.partitions_for_topic
    cluster.partitions_for_topic = lambda topic: known.get(topic) or every(topic)
    try:
        for name, _ in topics:  # the client's own metadata, outside the timing
            await producer.partitions_for(name)
        every = [(name, p) for name, count in topics for p in range(count)]
        results: list[Any] = []
        start = time.perf_counter()
        for i in range(0, len(every), PER_PRODUCE):
            sent = [
                await producer.send(n, RECORD, partition=p) for n, p in every[i : i + PER_PRODUCE]
            ]
            results += await asyncio.gather(*sent, return_exceptions=True)
        elapsed = time.perf_counter() - start
    finally:
        await producer.stop()
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"{len(errors)} errors: {errors[:3]}")
    return elapsed


def read_all(bootstrap: str, topics: list[tuple[str, int]]) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            **SLOW,
            "group.id": "partitions-bench",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            "topic.metadata.refresh.interval.ms": 600_000,
        }
    )
    total = sum(c for _, c in topics)
    start = time.perf_counter()
    consumer.assign([TopicPartition(n, p, 0) for n, c in topics for p in range(c)])
    got = 0
    deadline = time.monotonic() + 3000
    while got < total:
        if time.monotonic() > deadline:
            raise RuntimeError(f"read {got} of {total} records")
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def run_shape(shape: str, total: int, per_topic: int) -> Figures:
    from confluent_kafka.admin import AdminClient

    from tests.node_harness import start_node

    with tempfile.TemporaryDirectory() as tmp:
        node = start_node(Path(tmp) / "node", ["--zones", "zone-a"])
        try:
            assert node.proc is not None
            pid = node.proc.pid
            cpu: dict[str, float] = {}
            mark = _cpu_s(pid)

            def phase(name: str, took: float) -> None:
                nonlocal mark
                now = _cpu_s(pid)
                cpu[name], mark = now - mark, now
                print(
                    f"  {shape}: {name} {took:.2f} s, node CPU {cpu[name]:.1f} s, RSS "
                    f"{_status_mib(pid, 'VmRSS'):.0f} MiB, load {os.getloadavg()[0]:.1f}",
                    file=sys.stderr,
                    flush=True,
                )

            admin = AdminClient({"bootstrap.servers": node.bootstrap, **SLOW})
            start = time.perf_counter()
            if shape == "one topic":
                topics = create_one_topic(admin, total)
            else:
                topics = create_many_topics(admin, total, per_topic)
            create_s = time.perf_counter() - start
            del admin
            phase("create", create_s)
            md = metadata_ms(node.bootstrap, total)
            phase("metadata x4", md / 1000)
            produce_s = produce_all(node.bootstrap, topics)
            phase("produce-all", produce_s)
            read_s = read_all(node.bootstrap, topics)
            phase("read-all", read_s)
            # What the node spends with nothing asked of it: storage jobs' passes over
            # the partitions it leads (compaction every 5 s, retention every 30 s).
            time.sleep(IDLE_S)
            phase(f"idle {IDLE_S} s", IDLE_S)
            fig = Figures(
                shape,
                create_s,
                md,
                produce_s,
                read_s,
                _status_mib(pid, "VmRSS"),
                _status_mib(pid, "VmHWM"),
                cpu,
            )
        finally:
            node.stop(timeout=120)
    load = os.getloadavg()[0]
    print(
        f"{shape}: {total} partitions created in {fig.create_s:.1f} s, Metadata "
        f"{fig.metadata_ms:.0f} ms, produce-all {fig.produce_s:.1f} s, read-all "
        f"{fig.read_s:.1f} s, RSS {fig.rss_mib:.0f} MiB (peak {fig.peak_mib:.0f}, "
        f"{fig.rss_mib * 1024 / total:.2f} KiB per partition); node CPU s: "
        + ", ".join(f"{k} {v:.1f}" for k, v in fig.cpu.items())
        + f"; load average {load:.1f}",
        flush=True,
    )
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--per-topic", type=int, default=100, help="the many-topics shape")
    parser.add_argument("--shape", choices=("one", "many", "both"), default="both")
    args = parser.parse_args()
    figures = []
    if args.shape in ("one", "both"):
        figures.append(run_shape("one topic", args.partitions, args.per_topic))
    if args.shape in ("many", "both"):
        figures.append(run_shape("many topics", args.partitions, args.per_topic))
    head = figures[0]
    print(
        f"partitions: {args.partitions}, metadata ms {head.metadata_ms:.0f}, "
        f"produce-all s {head.produce_s:.1f}, read-all s {head.read_s:.1f}, "
        f"RSS MiB {max(f.rss_mib for f in figures):.0f}"
    )


if __name__ == "__main__":
    main()
