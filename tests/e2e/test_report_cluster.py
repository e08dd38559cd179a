"""The cost report over a real cluster's usage records agrees with the nodes' own counters.

Three zones, one node process each: producers and consumers in every zone
(one of them deliberately in the wrong zone, so some bytes do cross), then
`zonegate report` over the usage records the nodes wrote; its zone-to-zone
matrix must equal, byte for byte, what the nodes' /metrics counted.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.cluster_harness import Cluster, start_cluster
from tests.e2e import clients
from tests.e2e.records_fixture import SampleRecord

pytestmark = pytest.mark.e2e
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
        # Let the last long polls end, then read counters that no longer move.
        counted = _counted_matrix(cluster)
        for _ in range(30):
            time.sleep(1.0)
            again = _counted_matrix(cluster)
            if again == counted:
                break
            counted = again
    finally:
        cluster.stop()  # a clean stop writes the last interval's usage records
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
    assert reported == counted
    assert (out / "dashboard.html").stat().st_size > 1000
