"""A Kafka Streams exactly_once_v2 run and its check, for zonegate
(tests/e2e/test_streams_eos.py, 3 zones, kill -9 of nodes) and for a real Apache Kafka
broker (`python -m tests.e2e.streams_eos`, tests/apache_kafka.py), so the harness is
known to pass where exactly-once holds.

The application is tests/java/src/.../StreamsCount.java (Apache Kafka 4.3.1's
kafka-streams, from the jars tests/java_peer.py runs): per input record (key, unique
id) it adds one to the key's count in a state store and writes (key, "ID:COUNT").
A feeder writes the input (idempotent, 20 keys) while `faults` runs; the application
itself is also killed -9 once and started again, so its successor must fence the
zombie and restore its state from the changelog. Once the output holds an effect per
input, the output is read with read_committed and checked per key: every input id once,
and the counts exactly 1..n in order (a lost state update repeats a count, a duplicate
repeats an id or skips a count).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests import java_peer
from tests.e2e.txn_workload import offsets

INPUT, OUTPUT = "eos-in", "eos-out"
APP_ID = "eos-count"
KEYS = 20
MAIN = "zonegate.javapeer.StreamsCount"
_JVM_OPTS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")


class App:
    """The StreamsCount application in a JVM of its own; its stdout and log in `root`."""

    def __init__(self, root: Path, bootstrap: str, extra: tuple[str, ...] = ()) -> None:
        self.root, self.bootstrap, self.extra = root, bootstrap, extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.out = root / "app.out"
        self.starts = 0

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        log4j = java_peer.log4j2_option(self.root, self.root / "app.log")
        argv = [self.bootstrap, APP_ID, INPUT, OUTPUT, str(self.root / "state"), *self.extra]
        self.proc = subprocess.Popen(
            java_peer.java_command(MAIN, argv, (*_JVM_OPTS, log4j)),
            stdin=subprocess.DEVNULL,
            stdout=open(self.out, "ab"),  # noqa: SIM115 - the child's, for its life
            stderr=subprocess.STDOUT,
        )

    def running_count(self) -> int:
        return self.out.read_text().count("state RUNNING") if self.out.exists() else 0

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # a clean close (the shutdown hook)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self, chars: int = 4000) -> str:
        parts = [
            p.read_text(errors="replace")[-chars:]
            for p in (self.out, self.root / "app.log")
            if p.exists()  # the application may have died before it logged anything
        ]
        return "\n".join(p for p in parts if p)


def feed(bootstrap: str, stop: threading.Event, rate: float, sent: list[tuple[str, str]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    i = 0
    while not stop.is_set():
        key, value = f"k{i % KEYS}", f"id-{i}"
        producer.produce(INPUT, value.encode(), key=key.encode())
        sent.append((key, value))
        producer.poll(0)
        i += 1
        time.sleep(1 / rate)
    assert producer.flush(120) == 0, "the feeder's records were not all delivered"


def read_keyed(bootstrap: str, topic: str, partitions: int) -> list[tuple[str, str]]:
    """(key, value) of every committed record, in offset order per partition."""
    ends = offsets(bootstrap, topic, partitions, IsolationLevel.READ_COMMITTED)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eos-checker-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[str, str]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            if m.error() is None:
                out.append((m.key().decode(), m.value().decode()))
        pos = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
        if all(tp.offset >= ends[tp.partition] for tp in pos):
            break
    else:
        raise AssertionError(f"{topic} not read to its stable offsets {ends}")
    consumer.close()
    return out


def check(inputs: list[tuple[str, str]], output: list[tuple[str, str]]) -> dict[str, int]:
    """Anomalies per kind, plus the run's figures."""
    want: dict[str, list[str]] = defaultdict(list)
    for key, value in inputs:
        want[key].append(value)
    got: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for key, value in output:
        ident, count = value.rsplit(":", 1)
        got[key].append((ident, int(count)))
    ids = Counter(ident for rows in got.values() for ident, _ in rows)
    wrong_counts = 0
    for key in set(want) | set(got):
        counts = [c for _, c in got[key]]
        # Out of 1..n order, or past the key's n inputs (a reprocessed input counted again).
        wrong_counts += sum(1 for i, c in enumerate(counts) if c != i + 1 or c > len(want[key]))
    all_ids = {v for values in want.values() for v in values}
    return {
        "inputs": len(inputs),
        "outputs": len(output),
        "duplicate": sum(n - 1 for n in ids.values() if n > 1),
        "lost": len(all_ids - set(ids)),
        "unknown id": len(set(ids) - all_ids),
        "wrong count": wrong_counts,
    }


ANOMALIES = ("duplicate", "lost", "unknown id", "wrong count")


def run(
    root: Path,
    bootstrap: str,
    faults: Callable[[App], None],
    *,
    partitions: int = 4,
    rate: float = 50,
    extra: tuple[str, ...] = (),
) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics(
        [NewTopic(INPUT, partitions, 1), NewTopic(OUTPUT, partitions, 1)]
    ).values():
        f.result(30)
    app = App(root / "app", bootstrap, extra)
    sent: list[tuple[str, str]] = []
    stop = threading.Event()
    feeder = threading.Thread(target=feed, args=(bootstrap, stop, rate, sent))
    try:
        app.start()
        deadline = time.monotonic() + 90
        while app.running_count() == 0:
            assert time.monotonic() < deadline and app.proc and app.proc.poll() is None, (
                f"the application never ran:\n{app.tail()}"
            )
            time.sleep(0.25)
        feeder.start()
        faults(app)
        stop.set()
        feeder.join(180)
        want = len(sent)
        deadline = time.monotonic() + 120
        while sum(offsets(bootstrap, OUTPUT, partitions, IsolationLevel.READ_COMMITTED)) < want:
            assert time.monotonic() < deadline, f"the output never caught up:\n{app.tail()}"
            time.sleep(1)
        # A clean close commits nothing new (no input left): the output stays as read.
        time.sleep(2)
    finally:
        stop.set()
        app.stop()
    counts = check(sent, read_keyed(bootstrap, OUTPUT, partitions))
    counts["application starts"] = app.starts
    return counts


def kill_app_once(app: App, before_s: float = 6.0, after_s: float = 6.0) -> None:
    """The application killed -9 mid-run and started again (a zombie to fence)."""
    time.sleep(before_s)
    app.kill9()
    app.start()
    time.sleep(after_s)


def report(counts: dict[str, int], guarantee: str = "exactly_once_v2") -> str:
    return f"streams {guarantee}: " + ", ".join(f"{k} {v}" for k, v in counts.items())


def main() -> None:
    """Runs the application against a real Apache Kafka broker, killed -9 once. With
    `--guarantee at_least_once` the check must find duplicates (it is not vacuous)."""
    from tests.apache_kafka import ApacheKafkaBroker

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--guarantee", default="exactly_once_v2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = ApacheKafkaBroker(Path(tmp) / "kafka").start()
        try:
            extra = (f"processing.guarantee={args.guarantee}",)
            counts = run(Path(tmp), broker.bootstrap, kill_app_once, extra=extra)
        finally:
            broker.stop()
    print(report(counts, args.guarantee))
    if args.guarantee == "exactly_once_v2":
        assert all(counts[k] == 0 for k in ANOMALIES), counts


if __name__ == "__main__":
    main()
