"""Transactional produce against the same producer without transactions, and the
read_committed end-to-end latency, on a zonegate node and on a real Apache Kafka broker.

confluent-kafka, 1 KiB records, acks=all, idempotent, linger.ms 5, a 16 MiB client queue,
4 partitions. Per broker:
- throughput: one producer writes `--records` records as fast as the client can, either
  in transactions committed every 100 ms (begin, produce for 100 ms, commit_transaction,
  which flushes) or without transactions (then flush()); record bytes over the time from
  the first produce() until the last commit or the flush returns. A count, not a time,
  as benchmarks/produce.py: each phase writes as many bytes, so a node's background work
  (compaction of what was written) weighs the same on both sides; 300,000 by default
  (shorter phases, 0.5 s at 200 MB/s, varied 2x from one to the next). `--rounds` rounds
  (3), each ABBA-ordered (transactional, plain, plain, transactional), so a drift of the
  shared machine falls on both sides; the medians are reported;
- latency, before the rounds and again after them (when the node compacts what they
  wrote; the last line takes the worse of the two): the transactional producer at a
  fixed offered rate (`--latency-rate` records/s, committing every 100 ms) and a
  read_committed consumer in its own thread; per record the time it was read minus the
  time produce() was called (the value carries it). A record waits for its
  transaction's commit, so the figure holds up to 100 ms of waiting by design; the
  consumer's fetch.wait.max.ms is 100 (a fetch with nothing stable to return waits in
  the broker up to that long).
The node is one zonegate node (`serve --zones zone-a`, local store and SQLite, as
benchmarks/produce.py starts it); the Apache Kafka broker is tests/apache_kafka.py's
(one KRaft node), run after the node (`--broker` picks one of them). The line per broker is
`<broker> transactions: ...`, then the load average, and last exactly
`transactions: committed MB/s X, non-transactional Y, ratio R; read_committed e2e p99 Z ms`
for zonegate (R = X / Y).

    python benchmarks/transactions.py [--records N] [--rounds N] [--partitions N]
                                      [--latency-rate R] [--latency-seconds S]
                                      [--broker zonegate|apache-kafka|both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RECORD_BYTES = 1024
COMMIT_EVERY_S = 0.1


def _producer(bootstrap: str, transactional_id: str | None) -> Any:
    from confluent_kafka import Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 16 * 1024,
    }
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
    p = Producer(conf)
    if transactional_id is not None:
        p.init_transactions(30)
    return p


def _produce(p: Any, topic: str, value: bytes, partition: int) -> None:
    while True:
        try:
            p.produce(topic, value, partition=partition)
            p.poll(0)
            return
        except BufferError:  # the client's queue is full: serve delivery reports
            p.poll(0.001)


def throughput(bootstrap: str, topic: str, partitions: int, records: int, txn: bool) -> float:
    """MB/s (10^6 bytes) of one producer writing `records`, with transactions or without."""
    p = _producer(bootstrap, f"bench-{time.monotonic_ns()}" if txn else None)
    payload = os.urandom(RECORD_BYTES)
    # Warm up: metadata, connections (and the transaction coordinator).
    if txn:
        p.begin_transaction()
    _produce(p, topic, payload, 0)
    if txn:
        p.commit_transaction(30)
    else:
        p.flush(30)
    errors = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal errors
        errors += err is not None

    sent = 0
    now = time.perf_counter
    start = now()
    while sent < records:
        if txn:
            p.begin_transaction()
        until = now() + COMMIT_EVERY_S if txn else float("inf")
        while sent < records and now() < until:
            try:
                p.produce(topic, payload, partition=sent % partitions, on_delivery=delivered)
                sent += 1
                p.poll(0)
            except BufferError:
                p.poll(0.001)
        if txn:
            p.commit_transaction(60)
    if not txn:
        assert p.flush(120) == 0
    elapsed = now() - start
    if errors:
        raise RuntimeError(f"{errors} records were not delivered")
    return sent * RECORD_BYTES / elapsed / 1e6


def latency(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float) -> float:
    """The p99 in ms of read-time minus produce()-time, read with read_committed."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-lat-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    # Start at the end: only this phase's records are timed.
    consumer.assign([TopicPartition(topic, p, -1) for p in range(partitions)])  # OFFSET_END
    seen: list[float] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            for m in consumer.consume(1000, 0.1):
                if m.error() is None and len(m.value()) == RECORD_BYTES:
                    seen.append(time.time() - struct.unpack_from(">d", m.value())[0])

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(2)  # the consumer's first fetches are in place
    p = _producer(bootstrap, f"bench-lat-{time.monotonic_ns()}")
    pad = os.urandom(RECORD_BYTES - 8)
    sent = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        p.begin_transaction()
        end = time.perf_counter() + COMMIT_EVERY_S
        while time.perf_counter() < end:
            wait = start + sent / rate - time.perf_counter()
            if wait > 0:
                time.sleep(min(wait, 0.002))
                continue
            _produce(p, topic, struct.pack(">d", time.time()) + pad, sent % partitions)
            sent += 1
        p.commit_transaction(60)
    deadline = time.monotonic() + 30
    while len(seen) < sent and time.monotonic() < deadline:
        time.sleep(0.1)
    done.set()
    reader.join()
    consumer.close()
    if len(seen) < sent:
        raise RuntimeError(f"the read_committed consumer read {len(seen)} of {sent} records")
    seen.sort()
    return 1000 * seen[min(len(seen) - 1, int(0.99 * len(seen)))]


def measure(bootstrap: str, args: argparse.Namespace, name: str) -> dict[str, float]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("bench-txn", args.partitions, 1)])["bench-txn"].result(30)
    del admin

    def p99() -> float:
        return latency(
            bootstrap, "bench-txn", args.partitions, args.latency_rate, args.latency_seconds
        )

    idle_p99 = p99()
    txn: list[float] = []
    plain: list[float] = []
    for i in range(args.rounds):
        for is_txn in (True, False, False, True):
            mb_s = throughput(bootstrap, "bench-txn", args.partitions, args.records, is_txn)
            (txn if is_txn else plain).append(mb_s)
        print(
            f"{name} round {i + 1}: committed MB/s {txn[-2]:.1f} {txn[-1]:.1f}, "
            f"non-transactional {plain[-2]:.1f} {plain[-1]:.1f}",
            flush=True,
        )
    busy_p99 = p99()
    print(
        f"{name} read_committed e2e p99: {idle_p99:.0f} ms on the fresh broker, "
        f"{busy_p99:.0f} ms after the rounds",
        flush=True,
    )
    return {
        "txn": statistics.median(txn),
        "plain": statistics.median(plain),
        "p99_ms": max(idle_p99, busy_p99),
    }


def line(r: dict[str, float]) -> str:
    return (
        f"transactions: committed MB/s {r['txn']:.1f}, non-transactional {r['plain']:.1f}, "
        f"ratio {r['txn'] / r['plain']:.2f}; read_committed e2e p99 {r['p99_ms']:.0f} ms"
    )


@contextmanager
def zonegate_node() -> Iterator[str]:
    from tests.node_harness import start_node

    with tempfile.TemporaryDirectory() as tmp:
        node = start_node(Path(tmp) / "node", ["--zones", "zone-a"])
        try:
            yield node.bootstrap
        finally:
            node.stop()


@contextmanager
def apache_kafka() -> Iterator[str]:
    from tests.apache_kafka import ApacheKafkaBroker

    with tempfile.TemporaryDirectory() as tmp:
        broker = ApacheKafkaBroker(Path(tmp) / "kafka").start()
        try:
            yield broker.bootstrap
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--latency-rate", type=float, default=1000)
    parser.add_argument("--latency-seconds", type=float, default=8)
    parser.add_argument("--broker", choices=("zonegate", "apache-kafka", "both"), default="both")
    args = parser.parse_args()
    brokers: list[tuple[str, Callable[[], Any]]] = []
    if args.broker in ("zonegate", "both"):
        brokers.append(("zonegate", zonegate_node))
    if args.broker in ("apache-kafka", "both"):
        brokers.append(("apache kafka", apache_kafka))
    results: dict[str, dict[str, float]] = {}
    for name, start in brokers:
        with start() as bootstrap:
            results[name] = measure(bootstrap, args, name)
        print(f"{name} {line(results[name])}", flush=True)
    print("load average: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    if "zonegate" in results:
        print(line(results["zonegate"]))


if __name__ == "__main__":
    main()
