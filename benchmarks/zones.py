"""Cross-zone bytes and produce latency: zonegate's zone routing against plain leader routing.

Runs the same workload twice on a cluster of `zonegate node` processes (three
zones, two nodes each, sharing SQLite and a local object store): once with
zone routing, once with `--zone-routing false` (clients sent to the real
leaders, as plain Kafka does). A confluent-kafka producer and consumer per
zone. Reads cross-zone bytes from the nodes' own /metrics. Then produce
latency (p50/p99 at a fixed rate) on the multi-zone cluster against a single
node. Then the cost report's Kafka baseline: the bytes clients would have
exchanged with partition leaders in other zones, from the zone-routed run's
usage records (per-partition leader zones), against the Produce and Fetch
bytes the leader-routed run really moved across zones (issue 29: within 1%).
The last line is exactly
`cross-zone bytes per record byte: zonegate X, leader-routed Y`.

    python benchmarks/zones.py [--records N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cluster_harness import Cluster, start_cluster  # noqa: E402

ZONES = ["zone-a", "zone-b", "zone-c"]
PARTITIONS = 6


def data_cross_zone(cluster: Cluster) -> float:
    """Produce and Fetch bytes that crossed zones, from the nodes' counters."""
    total = 0.0
    for n in cluster.nodes:
        for name, labels, value in n.metrics():
            if name not in (
                "zonegate_traffic_sent_bytes_total",
                "zonegate_traffic_received_bytes_total",
            ) or labels["kind"] not in ("produce_data", "fetch_data"):
                continue
            if labels["peer_zone"] and labels["peer_zone"] != labels["node_zone"]:
                total += value
    return total


def report_baseline(objects: Path, topic: str) -> float:
    """The cost report's client-to-leader cross-zone bytes (its Kafka baseline's) of
    `topic`, from the usage records under `objects`."""
    from zonegate.analytics.facts import arrow_facts
    from zonegate.analytics.source import locate

    facts = arrow_facts(locate(objects.resolve().as_uri()))
    rows = zip(
        facts.column("kind").to_pylist(),
        facts.column("topic").to_pylist(),
        facts.column("leader_cross_bytes").to_pylist(),
        strict=True,
    )
    return float(sum(c for k, t, c in rows if t == topic and k in ("produce_data", "fetch_data")))


def workload(cluster: Cluster, topic: str, records: int) -> tuple[float, float]:
    """(cross-zone bytes per record byte, Produce and Fetch bytes that crossed zones)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.nodes[0].bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    payload = os.urandom(1024)
    produced = 0
    for zone in ZONES:
        p = Producer(
            {
                "bootstrap.servers": cluster.in_zone(zone)[0].bootstrap,
                "client.id": f"bench,zonegate_az={zone}",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        for i in range(records):
            while True:
                try:
                    p.produce(topic, payload, partition=i % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.01)
            p.poll(0)
        assert p.flush(120) == 0
        produced += records * len(payload)
    total = records * len(ZONES)
    for zone in ZONES:
        c = Consumer(
            {
                "bootstrap.servers": cluster.in_zone(zone)[-1].bootstrap,
                "client.id": f"bench,zonegate_az={zone}",
                "group.id": "unused",
            }
        )
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got = 0
        while got < total:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got += 1
        c.close()
    record_bytes = produced * (1 + len(ZONES))
    return cluster.traffic()["cross_zone"] / record_bytes, data_cross_zone(cluster)


def latency(bootstrap: str, zone: str, rate: float, records: int) -> dict[str, float]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("lat", PARTITIONS, 1)])["lat"].result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": f"lat,zonegate_az={zone}",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    lat: list[float] = []
    payload = os.urandom(1024)
    for i in range(PARTITIONS):  # warm up: metadata, producer id, connections
        p.produce("lat", payload, partition=i)
    p.flush(30)
    start = time.perf_counter()
    for i in range(records):
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            p.poll(0)
            time.sleep(max(due - time.perf_counter(), 0.0))
        sent = time.perf_counter()

        def cb(err: Any, msg: Any, sent: float = sent) -> None:
            if err is None:
                lat.append(time.perf_counter() - sent)

        p.produce("lat", payload, partition=i % PARTITIONS, on_delivery=cb)
    assert p.flush(60) == 0
    lat.sort()
    return {"p50": statistics.median(lat) * 1000, "p99": lat[int(len(lat) * 0.99) - 1] * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20_000, help="per zone")
    parser.add_argument("--latency-rate", type=float, default=5_000)
    parser.add_argument("--latency-records", type=int, default=20_000)
    parser.add_argument(
        "--metastore",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="the cluster's metadata store: one SQLite file, or a PostgreSQL server started "
        "for the run (fsync on) (default sqlite)",
    )
    args = parser.parse_args()
    results: dict[str, float] = {}
    data_crossed: dict[str, float] = {}
    postgres = None
    if args.metastore == "postgresql":
        from tests.postgres_server import PostgresServer

        postgres = PostgresServer(fsync=True)
        postgres.start()

    def store() -> tuple[str, ...]:
        return ("--metastore", postgres.new_database()) if postgres is not None else ()

    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("zonegate", ()), ("leader-routed", ("--zone-routing", "false"))):
            cluster = start_cluster(Path(tmp) / name, ZONES, 2, (*extra, *store()))
            try:
                results[name], data_crossed[name] = workload(cluster, "zones", args.records)
                if name == "zonegate":
                    multi = latency(
                        cluster.nodes[0].bootstrap,
                        "zone-a",
                        args.latency_rate,
                        args.latency_records,
                    )
            finally:
                cluster.stop()
        # Read once the nodes stopped: a clean stop writes the last interval's records.
        baseline = report_baseline(Path(tmp) / "zonegate" / "objects", "zones")
        single = start_cluster(Path(tmp) / "single", ["zone-a"], 1, store())
        try:
            one = latency(
                single.nodes[0].bootstrap, "zone-a", args.latency_rate, args.latency_records
            )
        finally:
            single.stop()
    if postgres is not None:
        postgres.close()
    print(f"metadata store: {args.metastore}")
    print(
        f"produce latency at {args.latency_rate:.0f} records/s: 3 zones x 2 nodes "
        f"p50 {multi['p50']:.1f} ms p99 {multi['p99']:.1f} ms; single node "
        f"p50 {one['p50']:.1f} ms p99 {one['p99']:.1f} ms"
    )
    measured = data_crossed["leader-routed"]
    print(
        f"Kafka baseline, client-to-leader cross-zone bytes: from the zonegate run's usage "
        f"records {baseline:,.0f}, measured leader-routed {measured:,.0f}, "
        f"ratio {baseline / measured:.4f}"
    )
    print(
        f"cross-zone bytes per record byte: zonegate {results['zonegate']:.5f}, "
        f"leader-routed {results['leader-routed']:.3f}"
    )


if __name__ == "__main__":
    main()
