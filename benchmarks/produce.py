"""Produce throughput, latency and CPU per byte: a zonegate node against librdkafka's mock cluster.

confluent-kafka, 1 KiB records, acks=all, idempotent, 4 partitions. The mock is
librdkafka's mock cluster (3 brokers) in a process of its own
(benchmarks/mock_cluster.py builds benchmarks/mock_cluster.c with gcc against
the client's librdkafka), so its CPU time is its own and not the client's.
Per broker:
- throughput: produce as fast as the client can, record bytes over the time
  from the first produce() until flush() returns; and the broker's CPU seconds
  (user + system, its process tree's, from /proc) over that phase per GiB of
  records: on a shared machine the MB/s follow the other jobs, the CPU per
  byte much less;
- consume: read those records back from the start, MB/s and CPU per GiB alike;
- latency: produce at a fixed offered rate (`--latency-rate` records/s, below
  both brokers' capacity, so the figure is the broker's and not the client
  queue's), per record the delivery report time minus the produce() time.
The node is one zonegate node (`serve --zones zone-a`) on the local store or,
with `--store s3`, on moto's S3 server. The latency phase runs in
`--latency-rounds` rounds, each on the node then on the mock (the node stays up,
idle, while the mock runs), and reports the median round: on a shared machine
a single stall of a few tens of ms moves a 5-second phase's p99, and
interleaving lets both brokers meet the same moments. Its summary line is
exactly `produce MB/s: zonegate X, mock Y, ratio R`.

Then, unless `--no-java`, the Java producer's own benchmark: the class behind
kafka-producer-perf-test (org.apache.kafka.tools.ProducerPerformance, from the
jars tests/java_peer.py runs) with the same record size and count and
acks=all (idempotence as Kafka 4's default: on), full speed, against a topic
with as many partitions on the node (the same one, after the phases above) and
on a real Apache Kafka broker (tests/apache_kafka.py: one KRaft node on this
machine, started after the node's run and stopped at the end), where the
confluent-kafka throughput phase runs too, for the broker's CPU per GiB on the
same workload. Megabytes are 10^6 bytes from the tool's records/s, as above
(the tool's own "MB/sec" is MiB); its line is
`java producer MB/s: zonegate X, apache kafka Y, ratio R`.

The last lines are the load average, then
`consume CPU s per GiB: zonegate X, mock Y, ratio R; MB/s zonegate A, mock B`,
and last exactly
`produce CPU s per GiB: zonegate X, mock Y, ratio R; MB/s zonegate A, mock B`
(R = X / Y).

With `--security-protocol SASL_SSL` the run instead compares, on one node, SASL_SSL
(SCRAM-SHA-512) with plaintext (benchmarks/produce_security.py), then, unless
`--no-java`, the same on a real Apache Kafka broker as the reference; the line before
the last is `apache kafka: produce MB/s over SASL_SSL: X, plaintext Y, ratio R`, the
last exactly `produce MB/s over SASL_SSL: X, plaintext Y, ratio R` (the node's).

With `--acls N` the run instead compares, on two identical nodes with Kafka's
StandardAuthorizer on, produce with N ACLs on the cluster against produce with only the
producer's own (benchmarks/produce_acls.py); its last line is exactly
`produce MB/s with N ACLs: X, without Y, ratio R`.

    python benchmarks/produce.py [--records N] [--store file|s3] [--latency-rate R]
                                 [--no-java] [--java-records N]
                                 [--security-protocol SASL_SSL [--security-rounds N]]
                                 [--acls N [--acl-rounds N]]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.cpu_time import cpu_s, measured  # noqa: E402 - needs the path above
from benchmarks.mock_cluster import mock_cluster  # noqa: E402

RECORD_BYTES = 1024


def run_producer(
    conf: dict[str, Any], topic: str, records: int, partitions: int, rate: float | None = None
) -> dict[str, float]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": "none",
            "queue.buffering.max.kbytes": 256 * 1024,
            **conf,
        }
    )
    # Warm up: metadata, producer id, connections.
    producer.produce(topic, b"x" * RECORD_BYTES, partition=0)
    producer.flush(30)
    found = len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
    if found != partitions:
        raise RuntimeError(f"topic {topic} has {found} partitions, expected {partitions}")

    payload = os.urandom(RECORD_BYTES)
    latencies: list[float] = []
    errors = 0
    now = time.perf_counter

    def on_delivery(err: Any, msg: Any, sent: float) -> None:
        nonlocal errors
        if err is not None:
            errors += 1
        else:
            latencies.append(now() - sent)

    start = now()
    for i in range(records):
        sent = now()
        if rate is not None:
            due = start + i / rate
            if due > sent:
                producer.poll(0)
                time.sleep(max(due - now(), 0))
                sent = now()
        while True:
            try:
                producer.produce(
                    topic,
                    payload,
                    partition=i % partitions,
                    on_delivery=lambda err, msg, sent=sent: on_delivery(err, msg, sent),
                )
                break
            except BufferError:
                producer.poll(0.001)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = now() - start
    if left or errors:
        raise RuntimeError(f"{left} records undelivered, {errors} delivery errors")
    latencies.sort()
    return {
        "mb_s": records * RECORD_BYTES / elapsed / 1e6,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "seconds": elapsed,
    }


@contextlib.contextmanager
def zonegate_node(
    args: argparse.Namespace,
) -> Iterator[tuple[dict[str, Any], Callable[[], str], int]]:
    """A started node with a 4-partition topic: its client config, a CPU report for S3, its pid."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.node_harness import start_node

    extra: list[str] = ["--zones", "zone-a"]
    env: dict[str, str] = {}
    moto = None
    if args.store == "s3":
        from tests.s3_server import FAKE_AWS_ENV, MotoS3Server

        moto = MotoS3Server(default_bucket="zonegate-bench")
        moto.start()
        extra += ["--object-store", "s3://zonegate-bench/bench", "--s3-endpoint", moto.endpoint_url]
        env = dict(FAKE_AWS_ENV)
    if args.seal_age_ms is not None:
        extra += ["--wal-seal-age-ms", str(args.seal_age_ms)]
    postgres = None
    if args.metastore == "postgresql":
        from tests.postgres_server import PostgresServer

        postgres = PostgresServer(fsync=True)  # a server as deployed: commits reach the disk
        postgres.start()
        extra += ["--metastore", postgres.new_database()]
    with tempfile.TemporaryDirectory() as tmp:
        node = start_node(Path(tmp) / "node", extra, env)
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            admin.create_topics([NewTopic("bench", args.partitions, 1)])["bench"].result(30)
            # An admin client left alive until the node stops logs librdkafka FAIL lines
            # (connection refused) at the end of every run.
            del admin
            assert node.proc is not None
            pids = {"node": node.proc.pid}
            if moto is not None:
                assert moto.pid is not None
                pids["moto's server"] = moto.pid
            cpu0 = {name: cpu_s(pid) for name, pid in pids.items()}

            def s3_report() -> str:
                if moto is None:
                    return ""
                sizes = [
                    obj["Size"]
                    for page in moto.client()
                    .get_paginator("list_objects_v2")
                    .paginate(Bucket="zonegate-bench", Prefix="bench/wal/")
                    for obj in page.get("Contents", [])
                ]
                # Where the S3 run's time went: all phases, so compare runs, not phases.
                mean_mb = sum(sizes) / max(len(sizes), 1) / 1e6
                used = ", ".join(f"{n} {cpu_s(pid) - cpu0[n]:.1f}" for n, pid in pids.items())
                return (
                    f"s3: {len(sizes)} WAL objects PUT, mean {mean_mb:.2f} MB;"
                    f" CPU seconds over all phases: {used}"
                )

            yield {"bootstrap.servers": node.bootstrap}, s3_report, node.proc.pid
        finally:
            node.stop()
            if moto is not None:
                moto.stop()
            if postgres is not None:
                postgres.close()


def latency_phase(conf: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    return run_producer(
        {**conf, "linger.ms": args.latency_linger_ms},
        "bench",
        args.latency_records,
        args.partitions,
        args.latency_rate,
    )


def _ratio(x: float, y: float) -> str:
    """x / y to two places; "n/a" when y is 0: a phase so short that the mock's process
    used less than one clock tick (10 ms) of CPU, as the README's 20,000-record run may."""
    return f"{x / y:.2f}" if y > 0 else "n/a"


def run_consumer(
    conf: dict[str, Any], topic: str, partitions: int, min_bytes: int
) -> dict[str, float]:
    """Read every partition from its start to its end, again until `min_bytes` are read, as
    fast as the client can.

    The mock keeps only the newest 5 MiB of each partition (librdkafka's mock log is
    capped), so it is read over several times to serve as many bytes as the node."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "group.id": "bench-consume",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **conf,
        }
    )
    now = time.perf_counter
    start = now()
    assignment = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    consumer.assign(assignment)
    at_end: set[int] = set()
    got = nbytes = 0
    progress = start
    while len(at_end) < partitions:
        # consume() waits for a whole batch until its timeout: short, so the end is not waited for.
        batch = consumer.consume(1000, timeout=0.05)
        if batch:
            progress = now()
        elif now() - progress > 30:
            raise RuntimeError(f"consumed {got} records, then nothing for 30 s")
        for msg in batch:
            err = msg.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition() or 0)
            elif err is not None:
                raise RuntimeError(f"consume error: {err}")
            else:
                got += 1
                nbytes += len(msg.value() or b"")
        if len(at_end) == partitions and nbytes < min_bytes:
            at_end.clear()
            consumer.assign(assignment)
    elapsed = now() - start
    consumer.close()
    return {"mb_s": nbytes / elapsed / 1e6, "seconds": elapsed, "bytes": nbytes}


# kafka-run-class.sh's performance options, with a heap that fits a small machine;
# no C1-only start-up tuning here, the producer's steady state is what is measured.
JAVA_PERF_OPTS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# ProducerPerformance's summary: "N records sent, R records/sec (M MB/sec), A ms avg
# latency, X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th."
_PERF_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency,"
    r" ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)


def java_producer(bootstrap: str, records: int, partitions: int) -> dict[str, float]:
    """kafka-producer-perf-test at full speed to a fresh topic on `bootstrap`."""
    from tests import java_peer

    topic = "java-bench"
    java_peer.tool(
        "kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
        "--partitions", str(partitions), "--replication-factor", "1",
    )  # fmt: skip
    return java_perf({"bootstrap.servers": bootstrap}, topic, records)


def java_perf(props: dict[str, str], topic: str, records: int) -> dict[str, float]:
    """ProducerPerformance (kafka-producer-perf-test) at full speed, acks=all, to the
    existing `topic`, with the client properties `props` (bootstrap.servers and any
    security settings): MB/s, the time, and the tool's latency figures."""
    from tests import java_peer

    # In a file: a property on the command line may not hold "=" (sasl.jaas.config does).
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as config:
        config.write("".join(f"{k}={v}\n" for k, v in {**props, "acks": "all"}.items()))
        config.flush()
        proc = java_peer.run_class(
            java_peer.TOOLS["kafka-producer-perf-test"],
            [
                "--topic", topic, "--num-records", str(records),
                "--record-size", str(RECORD_BYTES), "--throughput", "-1",
                "--command-config", config.name,
            ],
            timeout=900,
            jvm_opts=JAVA_PERF_OPTS,
            check=True,
        )  # fmt: skip
    found = _PERF_SUMMARY.findall(proc.stdout)
    if not found:
        raise RuntimeError(f"no summary from ProducerPerformance:\n{proc.stdout[-2000:]}")
    sent, rps, _mib, avg, _max, p50, _p95, p99 = (float(x) for x in found[-1])
    if int(sent) != records:
        raise RuntimeError(f"ProducerPerformance sent {sent:.0f} of {records} records")
    mb_s = rps * RECORD_BYTES / 1e6
    return {
        "mb_s": mb_s,
        "seconds": records * RECORD_BYTES / 1e6 / mb_s,
        "avg_ms": avg,
        "p50_ms": p50,
        "p99_ms": p99,
    }


def apache_kafka(
    records: int, java_records: int, partitions: int
) -> tuple[dict[str, float], dict[str, float]]:
    """On a real Apache Kafka broker: the Java producer's benchmark, then the confluent-kafka
    throughput phase (the JIT warm by then); each with the broker's CPU per GiB."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.apache_kafka import ApacheKafkaBroker

    with tempfile.TemporaryDirectory() as tmp:
        broker = ApacheKafkaBroker(Path(tmp) / "kafka").start()
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            java = measured(
                pid,
                lambda: java_producer(broker.bootstrap, java_records, partitions),
                java_records * RECORD_BYTES,
            )
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("bench", partitions, 1)])["bench"].result(30)
            del admin
            conf = {"bootstrap.servers": broker.bootstrap}
            confluent = measured(
                pid,
                lambda: run_producer(conf, "bench", records, partitions),
                records * RECORD_BYTES,
            )
            return java, confluent
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    # librdkafka's mock cluster auto-creates topics with 4 partitions; both sides use 4.
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--store", choices=("file", "s3"), default="file")
    parser.add_argument("--seal-age-ms", type=float, default=None)
    parser.add_argument(
        "--metastore",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="the node's metadata store: its SQLite file, or a PostgreSQL server started "
        "for the run (Debian's postgresql package; fsync on) (default sqlite)",
    )
    parser.add_argument(
        "--latency-rate",
        type=float,
        default=20_000,
        help="records/s offered in the latency phase (default 20000 = 20 MB/s)",
    )
    parser.add_argument("--latency-records", type=int, default=100_000)
    parser.add_argument(
        "--latency-rounds",
        type=int,
        default=3,
        help="latency phases per broker, interleaved node/mock; the median round is reported",
    )
    parser.add_argument(
        "--java",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the Java producer's benchmark (kafka-producer-perf-test) against the "
        "node and a real Apache Kafka broker, and the throughput phase against that broker; "
        "with --security-protocol SASL_SSL, the same rounds against that broker (default on)",
    )
    parser.add_argument(
        "--java-records",
        type=int,
        default=None,
        help="records in the Java producer's benchmark (default: --records)",
    )
    parser.add_argument(
        "--latency-linger-ms",
        type=float,
        default=5,
        help="the client's linger.ms in the latency phase (default 5, as in the throughput phase)",
    )
    parser.add_argument(
        "--security-protocol",
        choices=("PLAINTEXT", "SASL_SSL"),
        default="PLAINTEXT",
        help="SASL_SSL: measure produce over SASL_SSL with SCRAM-SHA-512 against plaintext on "
        "the same node in the same run (then on Apache Kafka, unless --no-java), instead of "
        "the node against the mock (default PLAINTEXT)",
    )
    parser.add_argument(
        "--security-rounds",
        type=int,
        default=3,
        help="with --security-protocol SASL_SSL: rounds of (SASL_SSL, plaintext); the median "
        "of each is reported (default 3)",
    )
    parser.add_argument(
        "--acls",
        type=int,
        default=None,
        help="measure produce with this many ACLs on the cluster (Kafka's StandardAuthorizer "
        "on) against the same node with only the producer's ACLs, instead of the node "
        "against the mock",
    )
    parser.add_argument(
        "--acl-rounds",
        type=int,
        default=4,
        help="with --acls: rounds of (with, without), in turn reversed; the median of each "
        "is reported (default 4)",
    )
    args = parser.parse_args()
    if args.acls is not None:
        if args.acls < 0 or args.acl_rounds < 1:
            parser.error("--acls must be at least 0 and --acl-rounds at least 1")
        from benchmarks.produce_acls import run as run_acls

        run_acls(args, run_producer)
        return
    if args.security_protocol == "SASL_SSL":
        from benchmarks.produce_security import run

        run(args, run_producer, java_perf)
        return
    if args.latency_rounds < 1:
        parser.error(f"--latency-rounds must be at least 1, got {args.latency_rounds}")
    load0 = os.getloadavg()
    gib = args.records * RECORD_BYTES
    rounds: list[tuple[dict[str, float], dict[str, float]]] = []
    with (
        mock_cluster(3, {"bench": args.partitions}) as (mock_bootstrap, mock_pid),
        zonegate_node(args) as (conf, s3_report, node_pid),
    ):
        mconf = {"bootstrap.servers": mock_bootstrap}
        # The mock's CPU is its own process's: it no longer shares the client's.
        z = measured(
            node_pid, lambda: run_producer(conf, "bench", args.records, args.partitions), gib
        )
        m = measured(
            mock_pid, lambda: run_producer(mconf, "bench", args.records, args.partitions), gib
        )
        # The consume pass reads back what the throughput phase wrote, before the latency
        # phases add more.
        zc = measured(node_pid, lambda: run_consumer(conf, "bench", args.partitions, gib))
        mc = measured(mock_pid, lambda: run_consumer(mconf, "bench", args.partitions, gib))
        for i in range(args.latency_rounds):
            rounds.append((latency_phase(conf, args), latency_phase(mconf, args)))
            zr, mr = rounds[-1]
            print(
                f"latency round {i + 1}: zonegate p50 {zr['p50_ms']:.1f} ms p99 {zr['p99_ms']:.1f}"
                f" ms;  mock p50 {mr['p50_ms']:.1f} ms p99 {mr['p99_ms']:.1f} ms"
            )
        report = s3_report()
        java_records = args.java_records or args.records
        if args.java:
            jz = measured(
                node_pid,
                lambda: java_producer(conf["bootstrap.servers"], java_records, args.partitions),
                java_records * RECORD_BYTES,
            )
    if args.java:
        # After the node has stopped: the broker's JVM never shares the machine with it.
        jk, kc = apache_kafka(args.records, java_records, args.partitions)
    load1 = os.getloadavg()
    if report:
        print(report)
    for name, r, lat in (
        ("zonegate", z, _median_round([zr for zr, _ in rounds])),
        ("mock", m, _median_round([mr for _, mr in rounds])),
    ):
        print(
            f"{name:9s} {r['mb_s']:8.1f} MB/s ({args.records} x {RECORD_BYTES} B in "
            f"{r['seconds']:.1f} s, store={args.store}, metastore={args.metastore});  "
            f"at {args.latency_rate:.0f} records/s, "
            f"linger.ms={args.latency_linger_ms:g}, median of {len(rounds)} rounds: "
            f"p50 {lat['p50_ms']:6.1f} ms  p99 {lat['p99_ms']:6.1f} ms"
        )
    print(
        f"produce MB/s: zonegate {z['mb_s']:.1f}, mock {m['mb_s']:.1f}, "
        f"ratio {z['mb_s'] / m['mb_s']:.2f}"
    )
    if args.java:
        for name, r in (("zonegate", jz), ("apache kafka", jk)):
            print(
                f"java producer, {name}: {r['mb_s']:.1f} MB/s ({java_records} x {RECORD_BYTES} B,"
                f" acks=all, idempotent);  latency avg {r['avg_ms']:.1f} ms"
                f" p50 {r['p50_ms']:.0f} ms p99 {r['p99_ms']:.0f} ms (the tool's, at full speed);"
                f"  broker CPU s per GiB {r['cpu_gib']:.2f}"
            )
        print(
            f"java producer MB/s: zonegate {jz['mb_s']:.1f}, apache kafka {jk['mb_s']:.1f}, "
            f"ratio {jz['mb_s'] / jk['mb_s']:.2f}"
        )
        print(
            f"apache kafka, confluent-kafka throughput phase: {kc['mb_s']:.1f} MB/s, broker CPU s"
            f" per GiB {kc['cpu_gib']:.2f} (zonegate {z['cpu_gib']:.2f}, mock {m['cpu_gib']:.2f})"
        )
    print(
        f"load average (1 min) at start {load0[0]:.1f}, at end {load1[0]:.1f}; "
        f"{os.cpu_count()} cores"
    )
    print(
        f"consume CPU s per GiB: zonegate {zc['cpu_gib']:.2f}, mock {mc['cpu_gib']:.2f}, ratio"
        f" {_ratio(zc['cpu_gib'], mc['cpu_gib'])}; MB/s zonegate {zc['mb_s']:.1f},"
        f" mock {mc['mb_s']:.1f} (MB read: zonegate {zc['bytes'] / 1e6:.0f},"
        f" mock {mc['bytes'] / 1e6:.0f})"
    )
    print(
        f"produce CPU s per GiB: zonegate {z['cpu_gib']:.2f}, mock {m['cpu_gib']:.2f}, ratio "
        f"{_ratio(z['cpu_gib'], m['cpu_gib'])}; MB/s zonegate {z['mb_s']:.1f}, mock {m['mb_s']:.1f}"
    )


def _median_round(rounds: list[dict[str, float]]) -> dict[str, float]:
    """The round whose p99 is the median (the lower middle one for an even count)."""
    return sorted(rounds, key=lambda r: r["p99_ms"])[(len(rounds) - 1) // 2]


if __name__ == "__main__":
    main()
