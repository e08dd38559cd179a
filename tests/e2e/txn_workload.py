"""A consume-transform-produce workload with Kafka transactions and its checker, in the
style of Jepsen's Kafka workload: the same code runs against zonegate
(tests/e2e/test_txn_checker.py, with kill -9 of nodes) and against a real Apache Kafka
broker (`python -m tests.e2e.txn_workload`, tests/apache_kafka.py), so the harness is
known to pass where transactions are right.

A feeder writes records with unique values to the input topic (idempotent, not
transactional). One worker per input partition (confluent-kafka, its own thread and
transactional id) reads its partition with read_committed and, per transaction, writes
each record it read to the output topic's partitions in turn and commits the input
offsets with send_offsets_to_transaction; some transactions it aborts on purpose (then
it seeks back to the last committed offsets). A commit whose outcome the client could not
learn is "unknown", and the worker starts again from the committed offsets, as an
application must. Each output value names its input record and its transaction.

The checker reads the output with read_committed once the run is over and the last
stable offsets have caught up with the high watermarks:
- aborted read: a record of a transaction the client aborted;
- lost write: a record of a transaction whose commit succeeded, not read;
- torn: a transaction read in part (a commit is all partitions or none);
- duplicate: an input record whose effect is read more than once;
- unprocessed: an input record whose effect is never read, once every worker's
  committed offset has reached its partition's end;
- hanging: an output partition whose last stable offset never reached its high
  watermark (a consumer stuck behind a transaction left open).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

INPUT, OUTPUT = "ctp-in", "ctp-out"
ANOMALIES = ("aborted read", "lost write", "torn", "duplicate", "unprocessed", "hanging")


@dataclass
class Txn:
    records: set[tuple[int, str]] = field(default_factory=set)  # (output partition, value)
    outcome: str = "open"  # commit, abort, unknown


@dataclass
class Worker:
    """Transactions of one input partition; `txns` keyed by "worker.sequence"."""

    partition: int
    bootstrap: str
    zone: str
    out_partitions: int
    abort_ratio: float
    txns: dict[str, Txn] = field(default_factory=dict)
    restarts: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    last_error: str = ""
    position: int = 0  # the next input offset, as last committed
    seq: int = 0  # the last transaction's number
    rnd: random.Random = field(default_factory=random.Random)
    # The watchdog's: the running thread's generation, when its current client call
    # started, and how many threads it replaced because a call hung.
    generation: int = 0
    call_started: float | None = None
    hung: int = 0

    def forget_open(self) -> None:
        for txn in self.txns.values():
            if txn.outcome == "open":
                txn.outcome = "unknown"

    def state(self) -> str:
        outcomes = Counter(t.outcome for t in self.txns.values())
        return (
            f"worker {self.partition} ({self.zone}): at input offset {self.position}, "
            f"transactions {dict(outcomes)}, restarts {self.restarts}, hung {self.hung}, "
            f"errors {dict(self.errors)}, last {self.last_error!r}"
        )

    def conf(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "client.id": f"zonegate_az={self.zone}"}


def _committed(consumer: Consumer, partition: int) -> int:
    """The group's committed offset of the input partition (0 before any commit); the
    client retries UNSTABLE_OFFSET_COMMIT while a transaction's offsets are pending."""
    while True:
        try:
            [tp] = consumer.committed([TopicPartition(INPUT, partition)], timeout=10)
            return max(tp.offset, 0)
        except KafkaException as e:
            if not e.args[0].retriable():
                raise
            time.sleep(0.2)


class Abandoned(Exception):
    """This worker thread was replaced while a client call of it hung."""


API_TIMEOUT_S = 15
HUNG_S = 25  # a client call still running this long is hung (its timeout is 15 s)


def run_worker(w: Worker, gen: int, stop: threading.Event, ends: dict[int, int]) -> None:
    """Transactions until `stop` is set and the committed offset reached `ends`; gives up
    without a word once the watchdog (`run`) has replaced this thread (`gen` is old)."""

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        w.call_started = time.monotonic()
        try:
            return fn(*args)
        finally:
            if w.generation != gen:
                raise Abandoned
            w.call_started = None

    while True:
        producer = Producer(
            {
                **w.conf(),
                "transactional.id": f"ctp-worker-{w.partition}",
                "transaction.timeout.ms": 10000,
                "message.timeout.ms": 9000,
                "linger.ms": 5,
            }
        )
        consumer = Consumer(
            {
                **w.conf(),
                "group.id": f"ctp-group-{w.partition}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            # Fences the previous instance's producer and ends its open transaction.
            call(producer.init_transactions, 4 * API_TIMEOUT_S)
            position = w.position = call(_committed, consumer, w.partition)
            consumer.assign([TopicPartition(INPUT, w.partition, position)])
            while not (stop.is_set() and position >= ends.get(w.partition, 1 << 62)):
                msgs = [m for m in consumer.consume(8, 0.5) if m.error() is None]
                if not msgs:
                    continue
                w.seq += 1
                name = f"{w.partition}.{w.seq}"
                txn = w.txns[name] = Txn()
                producer.begin_transaction()
                for i, m in enumerate(msgs):
                    value = f"{w.partition}:{m.offset()}|{name}"
                    out = (m.offset() + i) % w.out_partitions
                    producer.produce(OUTPUT, value.encode(), partition=out)
                    txn.records.add((out, value))
                after = msgs[-1].offset() + 1
                call(
                    producer.send_offsets_to_transaction,
                    [TopicPartition(INPUT, w.partition, after)],
                    consumer.consumer_group_metadata(),
                    API_TIMEOUT_S,
                )
                if w.rnd.random() < w.abort_ratio:
                    call(producer.abort_transaction, API_TIMEOUT_S)
                    txn.outcome = "abort"
                    consumer.seek(TopicPartition(INPUT, w.partition, position))
                    continue
                txn.outcome = "unknown"  # until the commit answers
                call(producer.commit_transaction, API_TIMEOUT_S)
                txn.outcome = "commit"
                position = w.position = after
            return
        except Abandoned:
            return  # its clients are left as they hang; the successor fenced the producer
        except KafkaException as e:
            err: KafkaError = e.args[0]
            w.errors[err.name()] += 1
            w.last_error = str(err)
            # Whatever was open is aborted by the next init_transactions (or already
            # ended); an open transaction's fate is unknown to the client.
            w.forget_open()
            w.restarts += 1
            time.sleep(0.5)
        finally:
            if w.generation == gen:
                consumer.close()
                producer.flush(0)


def feed(bootstrap: str, partitions: int, stop: threading.Event, rate: float) -> None:
    """Input records with unique values, round robin, at about `rate` per second."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    i = 0
    while not stop.is_set():
        producer.produce(INPUT, f"in-{i}".encode(), partition=i % partitions)
        producer.poll(0)
        i += 1
        time.sleep(1 / rate)
    assert producer.flush(120) == 0, "the feeder's records were not all delivered"


def offsets(bootstrap: str, topic: str, partitions: int, level: IsolationLevel) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    got = admin.list_offsets(req, isolation_level=level, request_timeout=15)
    return [got[TopicPartition(topic, p)].result(30).offset for p in range(partitions)]


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    ends: Sequence[int],
    isolation: str = "read_committed",
) -> list[str]:
    """Every value of `topic` below `ends` (stable offsets), read with read_committed
    (`isolation` read_uncommitted only for the harness's own negative control)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"checker-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            if m.error() is None:
                values.append(m.value().decode())
        pos = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
        # Control batches occupy offsets but are skipped: the position passes them.
        if all(tp.offset >= ends[tp.partition] for tp in pos):
            break
    else:
        raise AssertionError(f"{topic} not read to its stable offsets {ends}")
    consumer.close()
    return values


def wait_stable(bootstrap: str, topic: str, partitions: int, timeout: float) -> list[int]:
    """The output's last stable offsets once they equal the high watermarks (or at the
    timeout); the partitions still behind are the hanging ones."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            lso = offsets(bootstrap, topic, partitions, IsolationLevel.READ_COMMITTED)
            hw = offsets(bootstrap, topic, partitions, IsolationLevel.READ_UNCOMMITTED)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
            continue
        if lso == hw or time.monotonic() > deadline:
            return [h - s for s, h in zip(lso, hw, strict=True)]
        time.sleep(0.5)


def check(
    workers: Sequence[Worker], output: list[str], inputs: dict[int, int], behind: list[int]
) -> dict[str, int]:
    """The anomalies' counts and the run's figures (see the module's docstring)."""
    txns = {name: t for w in workers for name, t in w.txns.items()}
    read_txn = Counter(v.split("|")[1] for v in output)
    effects = Counter(v.split("|")[0] for v in output)
    seen = set(output)
    outcomes = Counter(t.outcome for t in txns.values())
    counts = {
        "transactions": len(txns),
        "committed": outcomes["commit"],
        "aborted on purpose": outcomes["abort"],
        "unknown outcome": outcomes["unknown"],
        "records read": len(output),
        "worker restarts": sum(w.restarts for w in workers),
        "aborted read": sum(n for name, n in read_txn.items() if txns[name].outcome == "abort"),
        "lost write": sum(
            1 for t in txns.values() if t.outcome == "commit" for r in t.records if r[1] not in seen
        ),
        "torn": sum(
            1
            for name in read_txn
            if not {v for _, v in txns[name].records} <= seen
            or read_txn[name] != len(txns[name].records)
        ),
        "duplicate": sum(n - 1 for n in effects.values() if n > 1),
        "unprocessed": sum(
            1 for p, end in inputs.items() for o in range(end) if effects[f"{p}:{o}"] == 0
        ),
        "hanging": sum(1 for b in behind if b > 0),
    }
    # Input offsets are dense only without control batches: the input is not
    # transactional, so each offset below the end is a record.
    return counts


def run(
    bootstrap: Callable[[int], tuple[str, str]],
    *,
    partitions: int = 4,
    out_partitions: int = 3,
    faults: Callable[[], None] = lambda: time.sleep(15),
    rate: float = 60,
    abort_ratio: float = 0.15,
    seed: int = 27,
    isolation: str = "read_committed",
) -> dict[str, int]:
    """One run: `bootstrap(i)` gives the i-th client's (bootstrap, zone); `faults` runs
    while the feeder and the workers do (its end ends the feed); returns `check`'s counts."""
    admin_boot = bootstrap(0)[0]
    admin = AdminClient({"bootstrap.servers": admin_boot})
    for f in admin.create_topics(
        [NewTopic(INPUT, partitions, 1), NewTopic(OUTPUT, out_partitions, 1)]
    ).values():
        f.result(30)
    stop_feed, stop = threading.Event(), threading.Event()
    ends: dict[int, int] = {}
    workers = [
        Worker(p, *bootstrap(p + 1), out_partitions=out_partitions, abort_ratio=abort_ratio)
        for p in range(partitions)
    ]
    for w in workers:
        w.rnd.seed(seed + w.partition)
    threads: dict[int, threading.Thread] = {}

    def launch(w: Worker) -> None:
        t = threading.Thread(target=run_worker, args=(w, w.generation, stop, ends), daemon=True)
        threads[w.partition] = t
        t.start()

    def watch() -> None:
        """librdkafka's send_offsets_to_transaction can hang past its timeout when the
        group coordinator's node left the metadata (confluentinc/librdkafka#5511, #5456):
        such a worker is replaced, as an application's watchdog would restart it."""
        for w in workers:
            started = w.call_started
            if started is not None and time.monotonic() - started > HUNG_S:
                w.hung += 1
                w.generation += 1
                w.call_started = None
                w.forget_open()
                launch(w)

    feeder = threading.Thread(target=feed, args=(admin_boot, partitions, stop_feed, rate))
    feeder.start()
    for w in workers:
        launch(w)
    failed: list[BaseException] = []

    def inject() -> None:
        try:
            faults()
        except BaseException as e:  # raised again below, after the workers' end
            failed.append(e)

    injector = threading.Thread(target=inject)
    injector.start()
    while injector.is_alive():
        watch()
        injector.join(1)
    stop_feed.set()
    feeder.join(180)
    ends.update(enumerate(offsets(admin_boot, INPUT, partitions, IsolationLevel.READ_UNCOMMITTED)))
    stop.set()
    deadline = time.monotonic() + 120
    while any(t.is_alive() for t in threads.values()) and time.monotonic() < deadline:
        watch()
        time.sleep(0.5)
    if failed:
        raise failed[0]
    assert not any(t.is_alive() for t in threads.values()), (
        f"a worker never reached its input's end {ends}:\n"
        + "\n".join(w.state() for w in workers)
        + "".join(_stack(t) for t in threads.values() if t.is_alive())
    )
    behind = wait_stable(admin_boot, OUTPUT, out_partitions, 60)
    lso = offsets(admin_boot, OUTPUT, out_partitions, IsolationLevel.READ_COMMITTED)
    output = read_all(admin_boot, OUTPUT, out_partitions, lso, isolation)
    counts = check(workers, output, ends, behind)
    counts["input records"] = sum(ends.values())
    counts["client hangs replaced"] = sum(w.hung for w in workers)
    for w in workers:
        for name, n in w.errors.items():
            counts[f"client error {name}"] = counts.get(f"client error {name}", 0) + n
    return counts


def _stack(thread: threading.Thread) -> str:
    """Where a stuck worker waits (the client call that never returned)."""
    frame = sys._current_frames().get(thread.ident or 0)
    if frame is None:
        return ""
    return f"\n{thread.name}:\n" + "".join(traceback.format_stack(frame)[-3:])


def report(counts: dict[str, int]) -> str:
    return "checker: " + ", ".join(f"{k} {v}" for k, v in counts.items())


def main() -> None:
    """Runs the workload against a real Apache Kafka broker (no faults): the harness's
    own check. With `--isolation read_uncommitted` the checker reads aborted
    transactions too and must report them (it is not vacuous)."""
    from tests.apache_kafka import ApacheKafkaBroker

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--isolation", default="read_committed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = ApacheKafkaBroker(Path(tmp) / "kafka").start()
        try:
            counts = run(
                lambda i: (broker.bootstrap, "zone-a"),
                faults=lambda: time.sleep(args.seconds),
                isolation=args.isolation,
            )
        finally:
            broker.stop()
    print(report(counts))
    if args.isolation == "read_committed":
        assert all(counts[k] == 0 for k in ANOMALIES), counts


if __name__ == "__main__":
    main()
