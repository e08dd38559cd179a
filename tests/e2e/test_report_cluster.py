"""The cost report over a real cluster's usage records agrees with the nodes' own counters.

Three zones, one node process each: producers and consumers in every zone
(one of them deliberately in the wrong zone, so some bytes do cross), then
`zonegate report` over the usage records the nodes wrote; its zone-to-zone
matrix must equal, byte for byte, what the nodes' /metrics counted. And a lost
zone: a zone-b client served by zone-a's node once zone-b's only node stopped is
counted apart, as the report's outage cross-zone bytes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.cluster_harness import Cluster, start_cluster, wait_until
from tests.e2e import clients
from tests.e2e.records_fixture import SampleRecord

pytestmark = pytest.mark.e2e
# A probe's request and answer as counted (a ReadIndex of watermarks of no stream,
# leader_forwarder/grpc_client.py RemoteLeader.probe), rounded up, and the nodes'
# heartbeat (serve_cli's, the test cluster's too).
PROBE_BYTES = 64.0
HEARTBEAT_S = 0.5
ZONES = ["zone-a", "zone-b", "zone-c"]


def _counted_matrix(cluster: Cluster) -> dict[tuple[str, str, str], float]:
    """(kind, from zone, to zone) -> bytes, from the nodes' counters, each transfer once."""
    out: dict[tuple[str, str, str], float] = defaultdict(float)
    for n in cluster.nodes:
        for name, labels, value in n.metrics():
            kind, here, peer = labels.get("kind"), labels.get("node_zone"), labels.get("peer_zone")
            if value == 0 or kind not in ("produce_data", "fetch_data", "other", "forward_rpc"):
                continue
            if name == "zonegate_traffic_sent_bytes_total":
                out[(kind, here, peer)] += value
            elif name == "zonegate_traffic_received_bytes_total" and kind != "forward_rpc":
                out[(kind, peer, here)] += value
    return dict(out)


def test_report_matrix_equals_node_counters(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    cluster = start_cluster(root, ZONES, 1, ("--usage-interval-s", "1"))
    try:
        topic = "billed"
        clients.ck_create_topic(cluster.nodes[0].bootstrap, topic, 3)
        recs = [SampleRecord(None, b"x" * 500, (), 1_700_000_000_000 + i) for i in range(300)]
        for zone, node in zip(ZONES, cluster.nodes, strict=True):
            # zone-c's client reaches zone-a's node: its bytes cross zones.
            target = cluster.nodes[0] if zone == "zone-c" else node
            clients.ck_produce(
                target.bootstrap,
                topic,
                recs,
                3,
                "none",
                extra={"client.id": f"app,zonegate_az={zone}"},
            )
        counts = {p: 300 for p in range(3)}
        for node in cluster.nodes:
            got = clients.ck_consume(node.bootstrap, topic, counts)
            assert len(got) == 900

        # Let the last long polls end, then read counters that no longer move. The peer
        # probes' forward_rpc moves every heartbeat whatever the clients do (bounded
        # below), so the clients' traffic is judged ended on the other kinds: with it
        # counted, the counters never settled and this waited its whole 30 s.
        def settled(matrix: dict[tuple[str, str, str], float]) -> dict[tuple[str, str, str], float]:
            return {k: v for k, v in matrix.items() if k[0] != "forward_rpc"}

        counted = _counted_matrix(cluster)
        for _ in range(30):
            time.sleep(1.0)
            again = _counted_matrix(cluster)
            if settled(again) == settled(counted):
                counted = again
                break
            counted = again
        read_at = time.monotonic()
    finally:
        cluster.stop()  # a clean stop writes the last interval's usage records
    probing_s = time.monotonic() - read_at
    assert any(f != t for _, f, t in counted), "the workload should have crossed zones"

    out = tmp_path / "report"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zonegate",
            "report",
            "--usage",
            (root / "objects").as_uri(),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    matrix = pq.read_table(out / "parquet" / "matrix").to_pylist()
    reported = {(r["kind"], r["from_zone"], r["to_zone"]): float(r["bytes"]) for r in matrix}
    # Every node probes every other's leader RPC each heartbeat (broker/peer_probes.py),
    # counted as forward_rpc like any leader call, also after the counters were read
    # and until each node stopped: the report may hold those probes' bytes more, and
    # nothing else. Everything else is equal to the byte.
    most = (probing_s / HEARTBEAT_S + 2) * PROBE_BYTES
    for key in reported.keys() | counted.keys():
        got, want = reported.get(key, 0.0), counted.get(key, 0.0)
        if key[0] == "forward_rpc":
            assert want <= got <= want + most, (key, got, want, most)
        else:
            assert got == want, (key, got, want)
    assert (out / "dashboard.html").stat().st_size > 1000


def _brokers_told(bootstrap: str, client_id: str) -> set[int]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id})
    return set(admin.list_topics(timeout=10).brokers)


def test_a_lost_zones_clients_served_elsewhere_are_an_outage(tmp_path: Path) -> None:
    from zonegate.analytics.job import run_report
    from zonegate.analytics.progress import Progress
    from zonegate.analytics.source import locate
    from zonegate.cost_model import price_table

    root = tmp_path / "cluster"
    cluster = start_cluster(root, ["zone-a", "zone-b"], 1, ("--usage-interval-s", "1"))
    a, b = cluster.nodes
    topic, client_id = "lost", "app,zonegate_az=zone-b"
    recs = [SampleRecord(None, b"o" * 500, (), 1_700_000_000_000 + i) for i in range(100)]
    try:
        clients.ck_create_topic(a.bootstrap, topic, 1)
        # zone-b alive: a's Metadata sends its client there (a's bytes are "routed").
        assert _brokers_told(a.bootstrap, client_id) == {b.node_id}
        b.stop()
        # zone-b lost: a serves its clients itself.
        assert wait_until(lambda: _brokers_told(a.bootstrap, client_id) == {a.node_id}, 15)
        clients.ck_produce(a.bootstrap, topic, recs, 1, "none", extra={"client.id": client_id})
    finally:
        cluster.stop()
    out = tmp_path / "report"
    with (tmp_path / "progress.txt").open("w") as log:
        result = run_report(
            locate((root / "objects").as_uri()),
            out,
            price_table("aws", "us-east-1"),
            progress=Progress(5, log),
        )
    rows = [
        r
        for f in root.rglob("*.parquet")
        if "usage" in f.parts
        for r in pq.read_table(f).to_pylist()
    ]
    assert {r["schema_version"] for r in rows} == {4}
    mine = [r for r in rows if r["client_id"] == client_id]
    # At zone-b's own node (while it ran) nothing crossed; at zone-a's everything did.
    assert {r["cross_zone_reason"] for r in mine if r["node_zone"] == "zone-b"} <= {""}
    crossed = [r for r in mine if r["node_zone"] == "zone-a"]
    reasons = {r["cross_zone_reason"] for r in crossed}
    assert reasons == {"routed", "outage"}, reasons
    lost = [r for r in crossed if r["cross_zone_reason"] == "outage"]
    assert {(r["node_zone"], r["peer_zone"]) for r in lost} == {("zone-a", "zone-b")}
    outage = result.tables["outage_cross_zone"]
    print(outage)
    assert {(r["zone"], r["served_in_zone"]) for r in outage} == {("zone-b", "zone-a")}
    assert sum(r["bytes"] for r in outage) == sum(r["bytes_in"] + r["bytes_out"] for r in lost)
    assert sum(r["produce_bytes"] for r in outage) >= 100 * 500
    # Counted in the totals too: the outage is part of zone-b -> zone-a traffic, not hidden.
    matrix = {
        (r["kind"], r["from_zone"], r["to_zone"]): r["bytes"] for r in result.tables["matrix"]
    }
    assert matrix[("produce_data", "zone-b", "zone-a")] >= sum(r["produce_bytes"] for r in outage)
