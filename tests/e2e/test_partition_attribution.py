"""Usage records attribute bytes per partition, to the zone of each partition's own leader.

Three zones, one node process each, a 6-partition topic whose leaders sit in
all three zones; a producer and a consumer in every zone, each writing and
reading every partition. Then:

- the leader zones in the usage records are the metadata store's, partition by
  partition: each zone's share of the produced and fetched bytes is the share
  of the record bytes sent to the partitions it leads, and the records' sums
  equal the bytes the nodes counted on the wire;
- the report's Kafka baseline (bytes that clients would have exchanged with
  leaders in other zones) equals what the same workload moves across zones on
  a leader-routed cluster (`--zone-routing false`), measured by its nodes.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cluster_harness import Cluster, start_cluster
from tests.e2e import clients

pytestmark = [pytest.mark.e2e, pytest.mark.alone]
ZONES = ["zone-a", "zone-b", "zone-c"]
PARTITIONS = 6
PER_PARTITION = 150  # records of 1 KiB per producer per partition
TOPIC = "attributed"


def _workload(cluster: Cluster) -> dict[int, int]:
    """Every zone's producer writes every partition, then every zone's consumer reads
    them all; value bytes sent to each partition."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    clients.ck_create_topic(cluster.nodes[0].bootstrap, TOPIC, PARTITIONS)
    payload = os.urandom(1024)
    sent: dict[int, int] = defaultdict(int)
    for zone in ZONES:
        p = Producer(
            {
                "bootstrap.servers": cluster.in_zone(zone)[0].bootstrap,
                "client.id": f"producer,zonegate_az={zone}",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        for i in range(PER_PARTITION * PARTITIONS):
            p.produce(TOPIC, payload, partition=i % PARTITIONS)
            sent[i % PARTITIONS] += len(payload)
            p.poll(0)
        assert p.flush(60) == 0
    total = PER_PARTITION * PARTITIONS * len(ZONES)
    for zone in ZONES:
        c = Consumer(
            {
                "bootstrap.servers": cluster.in_zone(zone)[0].bootstrap,
                "client.id": f"consumer,zonegate_az={zone}",
                "group.id": "unused",
                "enable.auto.commit": False,
            }
        )
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got = 0
        deadline = time.monotonic() + 120
        while got < total and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got += 1
        c.close()
        assert got == total, f"{zone}: read {got} of {total}"
    return dict(sent)


def _wire(cluster: Cluster) -> dict[tuple[str, bool], float]:
    """(kind, crossed zones) -> bytes the nodes counted, once the counters stop moving.

    Every node probes every other's leader RPC each heartbeat (broker/peer_probes.py),
    counted as forward_rpc: those counters never stop moving, so whether the clients'
    traffic has ended is judged on the other kinds (otherwise every call waited 30 s)."""

    def read() -> dict[tuple[str, bool], float]:
        out: dict[tuple[str, bool], float] = defaultdict(float)
        for n in cluster.nodes:
            for name, labels, value in n.metrics():
                if name not in (
                    "zonegate_traffic_sent_bytes_total",
                    "zonegate_traffic_received_bytes_total",
                ):
                    continue
                peer, here = labels["peer_zone"], labels["node_zone"]
                out[(labels["kind"], bool(peer) and peer != here)] += value
        return dict(out)

    def settled(counters: dict[tuple[str, bool], float]) -> dict[tuple[str, bool], float]:
        return {k: v for k, v in counters.items() if k[0] != "forward_rpc"}

    counted = read()
    for _ in range(30):
        time.sleep(1.0)
        again = read()
        if settled(again) == settled(counted):
            counted = again
            break
        counted = again
    return counted


def _leader_zones(root: Path) -> dict[int, str]:
    """Partition -> zone of its leader, from the metadata store (node n is ZONES[n-1])."""
    db = sqlite3.connect(root / "meta.db")
    try:
        rows = db.execute(
            "SELECT p.partition, p.leader_node FROM partitions p JOIN topics t "
            "ON p.topic_id = t.topic_id WHERE t.name = ? AND t.deleted = 0",
            (TOPIC,),
        ).fetchall()
    finally:
        db.close()
    return {int(p): ZONES[int(node) - 1] for p, node in rows}


def _records(root: Path) -> list[dict[str, object]]:
    tables = [pq.read_table(p) for p in sorted((root / "objects" / "usage").rglob("*.parquet"))]
    return pa.concat_tables(tables, promote_options="default").to_pylist()


def test_bytes_go_to_each_partitions_leader_zone_and_baseline_matches_kafka(
    tmp_path: Path,
) -> None:
    from zonegate.analytics.job import run_report
    from zonegate.analytics.progress import Progress
    from zonegate.analytics.source import locate
    from zonegate.cost_model import price_table

    root = tmp_path / "routed"
    cluster = start_cluster(root, ZONES, 1, ("--usage-interval-s", "1"))
    try:
        sent = _workload(cluster)
        leaders = _leader_zones(root)  # before the stop moves them to the last node up
        wire = _wire(cluster)
    finally:
        cluster.stop()  # a clean stop writes the last interval's records
    assert set(leaders.values()) == set(ZONES), leaders  # led in three zones

    records = [r for r in _records(root) if r["topic"] == TOPIC]
    by_kind_zone: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        assert r["schema_version"] == 4  # leader zones since 2; principals 3; reasons 4
        if r["kind"] in ("produce_data", "fetch_data"):
            assert r["principal"] == "User:ANONYMOUS"  # PLAINTEXT clients
        if r["kind"] == "produce_data":
            by_kind_zone[("produce", str(r["leader_zone"]))] += int(r["bytes_in"])  # type: ignore[call-overload]
        elif r["kind"] == "fetch_data":
            by_kind_zone[("fetch", str(r["leader_zone"]))] += int(r["bytes_out"])  # type: ignore[call-overload]
    value_bytes = sum(sent.values())
    for kind in ("produce", "fetch"):
        total = sum(b for (k, _), b in by_kind_zone.items() if k == kind)
        assert {z for (k, z) in by_kind_zone if k == kind} == set(ZONES)
        for zone in ZONES:
            share = sum(b for p, b in sent.items() if leaders[p] == zone) / value_bytes
            measured = by_kind_zone[(kind, zone)] / total
            # Batch headers and the frames' overhead follow the batches' sizes.
            assert measured == pytest.approx(share, abs=0.01), (kind, zone, measured, share)
    # The records' sums are the wire's, to the byte (every record, any topic).
    all_records = _records(root)
    for kind in ("produce_data", "fetch_data"):
        in_records = sum(
            int(r["bytes_in"]) + int(r["bytes_out"])  # type: ignore[call-overload]
            for r in all_records
            if r["kind"] == kind
        )
        assert in_records == wire.get((kind, False), 0) + wire.get((kind, True), 0), kind

    result = run_report(
        locate((root / "objects").as_uri()),
        tmp_path / "report",
        price_table("aws", "us-east-1"),
        progress=Progress(5, live=False),
    )
    daily = result.tables["daily"]
    baseline = sum(r["leader_cross_produce_bytes"] + r["leader_cross_fetch_bytes"] for r in daily)

    plain_root = tmp_path / "leader-routed"
    plain = start_cluster(plain_root, ZONES, 1, ("--zone-routing", "false"))
    try:
        _workload(plain)
        plain_wire = _wire(plain)
    finally:
        plain.stop()
    kafka_like = plain_wire.get(("produce_data", True), 0) + plain_wire.get(("fetch_data", True), 0)
    print(
        f"client-to-leader cross-zone bytes: report {baseline:,}, leader-routed {kafka_like:,.0f}"
    )
    assert baseline == pytest.approx(kafka_like, rel=0.01)
