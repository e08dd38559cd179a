"""What `zonegate.workers` 0 means (broker/cores.py), and the node's one /metrics made
from its processes' (broker/metrics_merge.py). Pure: no network, no processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from zonegate.broker.cores import allowed_cores, quota_cores, workers_setting
from zonegate.broker.metrics_merge import gauge_total, merge

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("line", "cores"),
    [
        ("max 100000", None),
        ("200000 100000", 2),
        ("150000 100000", 2),  # a core and a half: two processes can use it
        ("50000 100000", 1),
        ("400000 100000\n", 4),
        ("garbage", None),
        ("0 100000", None),
    ],
)
def test_the_cgroup_quota_in_cores(line: str, cores: int | None) -> None:
    assert quota_cores(line) == cores


def test_allowed_cores_is_the_quota_capped_by_the_cpus_we_may_run_on(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    assert allowed_cores(cpu_max) == affinity  # no cgroup v2 file: the affinity
    cpu_max.write_text("max 100000\n")
    assert allowed_cores(cpu_max) == affinity
    cpu_max.write_text("100000 100000\n")
    assert allowed_cores(cpu_max) == 1
    cpu_max.write_text(f"{(affinity + 3) * 100000} 100000\n")
    assert allowed_cores(cpu_max) == affinity


def test_workers_zero_means_the_cores_allowed() -> None:
    assert workers_setting(3) == 3
    assert workers_setting(0) == allowed_cores()


# As prometheus_client writes them (a counter's family named with its _total).
NODE = """# HELP zonegate_traffic_sent_bytes_total Bytes this node sent
# TYPE zonegate_traffic_sent_bytes_total counter
zonegate_traffic_sent_bytes_total{node="1",kind="produce"} 10.0
# HELP zonegate_connections Open Kafka client connections
# TYPE zonegate_connections gauge
zonegate_connections{node="1"} 3.0
# HELP zonegate_partitions_led Partitions this node leads
# TYPE zonegate_partitions_led gauge
zonegate_partitions_led{node="1"} 6.0
# HELP zonegate_latency_seconds Latency
# TYPE zonegate_latency_seconds histogram
zonegate_latency_seconds_bucket{node="1",le="0.1"} 1.0
zonegate_latency_seconds_bucket{node="1",le="+Inf"} 2.0
zonegate_latency_seconds_count{node="1"} 2.0
zonegate_latency_seconds_sum{node="1"} 0.5
"""
WORKER = """# HELP zonegate_traffic_sent_bytes_total Bytes this node sent
# TYPE zonegate_traffic_sent_bytes_total counter
zonegate_traffic_sent_bytes_total{node="1",kind="produce"} 5.0
zonegate_traffic_sent_bytes_total{node="1",kind="fetch"} 7.0
# HELP zonegate_connections Open Kafka client connections
# TYPE zonegate_connections gauge
zonegate_connections{node="1"} 4.0
# HELP zonegate_partitions_led Partitions this node leads
# TYPE zonegate_partitions_led gauge
zonegate_partitions_led{node="1"} 0.0
# HELP zonegate_latency_seconds Latency
# TYPE zonegate_latency_seconds histogram
zonegate_latency_seconds_bucket{node="1",le="0.1"} 3.0
zonegate_latency_seconds_bucket{node="1",le="+Inf"} 3.0
zonegate_latency_seconds_count{node="1"} 3.0
zonegate_latency_seconds_sum{node="1"} 0.1
"""


def _values(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text.decode())
        for s in f.samples
    }


def test_counters_histograms_and_per_process_gauges_add_up_the_rest_is_the_nodes() -> None:
    v = _values(merge(NODE, [WORKER]))
    one = (("node", "1"),)
    assert v[("zonegate_traffic_sent_bytes_total", (("kind", "produce"), *one))] == 15.0
    assert v[("zonegate_traffic_sent_bytes_total", (("kind", "fetch"), *one))] == 7.0
    assert v[("zonegate_connections", one)] == 7.0
    assert v[("zonegate_partitions_led", one)] == 6.0  # the node process's alone
    assert v[("zonegate_latency_seconds_bucket", (("le", "0.1"), *one))] == 4.0
    assert v[("zonegate_latency_seconds_bucket", (("le", "+Inf"), *one))] == 5.0
    assert v[("zonegate_latency_seconds_count", one)] == 5.0
    assert v[("zonegate_latency_seconds_sum", one)] == pytest.approx(0.6)


def test_a_restarted_workers_counters_are_kept_not_its_gauges() -> None:
    v = _values(merge(NODE, [], retired=[WORKER]))
    one = (("node", "1"),)
    assert v[("zonegate_traffic_sent_bytes_total", (("kind", "produce"), *one))] == 15.0
    assert v[("zonegate_connections", one)] == 3.0  # its connections went with it
    assert v[("zonegate_latency_seconds_count", one)] == 5.0


def test_the_node_alone_is_unchanged() -> None:
    assert _values(merge(NODE, [])) == _values(NODE.encode())
    assert gauge_total(WORKER, "zonegate_connections") == 4.0
    assert gauge_total(WORKER, "zonegate_absent") == 0.0
