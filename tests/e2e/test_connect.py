"""Kafka Connect in distributed mode against zonegate: a file source and a file sink
connector move lines through a topic, across kill -9 of the worker and of a node.

The worker (tests/connect_worker.py) is Apache Kafka's own ConnectDistributed,
bootstrapped to a cluster of two zonegate nodes in one zone; its config,
offset and status topics are compacted and its members form a group of
protocol type `connect`, described as a real Apache Kafka broker describes the
same worker's group (tests/apache_kafka.py). Connect delivers at least once: a kill -9 of the worker
repeats the records after the last committed offsets, in two stages (the
source re-reads from its last committed file position, so the topic holds
those lines twice; the sink re-consumes from its group's last committed
offsets, so it writes those records again). The sink file may hold a line
twice, up to twice the batch in flight at the kill, but never lacks one and
never reorders (one partition): with each repeat dropped it is exactly the
source file. A node's kill -9 may repeat records too (a commit sent to the dying
node fails and is retried after a rebalance), and loses none.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.types import GroupId

from tests import java_peer
from tests.apache_kafka import ApacheKafkaBroker
from tests.cluster_harness import Cluster, ClusterNode, start_cluster, wait_until
from tests.connect_worker import ConnectWorker
from tests.kafka_raw import RawConnection
from zonegate.router.rendezvous import choose_node

pytestmark = pytest.mark.e2e

TOPIC = "connect-lines"
SOURCE = "file-source"
SINK = "file-sink"
BATCH = 300


@dataclass
class Pipeline:
    cluster: Cluster
    worker: ConnectWorker
    source: Path
    sink: Path
    written: int = 0

    @property
    def group(self) -> str:
        return self.worker.group_id

    def append(self, count: int) -> list[str]:
        lines = [f"line-{i}" for i in range(self.written, self.written + count)]
        with open(self.source, "a") as f:
            f.write("".join(f"{x}\n" for x in lines))
        self.written += count
        return lines

    def expected(self) -> list[str]:
        return [f"line-{i}" for i in range(self.written)]

    def out(self) -> list[str]:
        return self.sink.read_text().splitlines() if self.sink.exists() else []

    def wait_all(self, timeout: float = 120) -> list[str]:
        """Waits until the sink file holds every line written so far; its lines."""
        want = set(self.expected())
        if not wait_until(lambda: want <= set(self.out()), timeout, 0.5):
            missing = sorted(want - set(self.out()))
            raise AssertionError(
                f"{len(missing)} lines never reached the sink, e.g. {missing[:5]}\n"
                f"{self.worker.log_tail()}"
            )
        return self.out()


def _group_with_coordinator(node_id: int, ids: list[int]) -> str:
    return next(
        g for g in (f"connect-{i}" for i in range(1000)) if choose_node(g, -1, ids) == node_id
    )


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    root = tmp_path_factory.mktemp("connect")
    cluster = start_cluster(
        root / "cluster", ["zone-a"], 2, ("--group-initial-rebalance-delay-ms", "300")
    )
    ids = [n.node_id for n in cluster.nodes]
    # The node the last test kills leads the topic's partition and coordinates the
    # workers' group, so the kill moves both.
    group = _group_with_coordinator(choose_node(TOPIC, 0, ids), ids)
    bootstrap = ",".join(n.bootstrap for n in cluster.nodes)
    worker = ConnectWorker(root / "worker", bootstrap, group)
    try:
        # The topic exists before the source produces (no auto-creation race to log).
        java_peer.tool(
            "kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC,
            "--partitions", "1",
        )  # fmt: skip
        worker.start()
        p = Pipeline(cluster, worker, root / "source.txt", root / "sink.txt")
        p.source.touch()
        worker.rest(
            "POST",
            "/connectors",
            {
                "name": SOURCE,
                "config": {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                    "tasks.max": "1",
                    "file": str(p.source),
                    "topic": TOPIC,
                },
            },
        )
        worker.rest(
            "POST",
            "/connectors",
            {
                "name": SINK,
                "config": {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                    "tasks.max": "1",
                    "file": str(p.sink),
                    "topics": TOPIC,
                },
            },
        )
        worker.wait_running(SOURCE)
        worker.wait_running(SINK)
        yield p
    finally:
        worker.stop()
        cluster.stop()


def _deduplicated(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))


def test_records_move_from_source_file_to_sink_file(pipeline: Pipeline) -> None:
    pipeline.append(BATCH)
    # No failure yet: each line exactly once, in order.
    assert pipeline.wait_all() == pipeline.expected()


def test_internal_topics_are_compacted(pipeline: Pipeline) -> None:
    bootstrap = pipeline.worker.bootstrap
    for suffix in ("configs", "offsets", "status"):
        out = java_peer.tool(
            "kafka-configs", "--bootstrap-server", bootstrap, "--describe",
            "--entity-type", "topics", "--entity-name", f"{pipeline.group}-{suffix}",
        ).stdout  # fmt: skip
        assert "cleanup.policy=compact" in out, out


def test_workers_form_a_group_of_protocol_type_connect(pipeline: Pipeline) -> None:
    node = pipeline.cluster.nodes[0]
    # kafka-groups --list, as an operator reads it: the group, its type and protocol.
    out = java_peer.tool("kafka-groups", "--bootstrap-server", node.bootstrap, "--list").stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:] if line.strip()}
    assert rows[pipeline.group] == ["Classic", "connect"], out

    # ListGroups and DescribeGroups as Kafka's admin client sends them: to the group's
    # coordinator, which lists the groups it coordinates.
    conn = RawConnection(_coordinator(pipeline).port)
    try:
        listed = conn.request(ListGroupsRequest(states_filter=(), types_filter=()))
        described = conn.request(
            DescribeGroupsRequest(
                groups=(GroupId(pipeline.group),), include_authorized_operations=False
            )
        )
    finally:
        conn.close()
    assert listed.error_code == ErrorCode.none
    mine = [g for g in listed.groups if g.group_id == pipeline.group]
    assert [(g.protocol_type, g.group_state, g.group_type) for g in mine] == [
        ("connect", "Stable", "classic")
    ]
    (group,) = described.groups
    assert group.error_code == ErrorCode.none
    assert (group.group_state, group.protocol_type) == ("Stable", "connect")
    # Kafka 4's workers agree on incremental cooperative rebalancing with sessions.
    assert group.protocol_data == "sessioned"
    (member,) = group.members
    assert member.client_id == f"connect-127.0.0.1:{pipeline.worker.port}"
    assert member.member_metadata and member.member_assignment


def _described(port: int, group: str) -> tuple[str, str, str, int]:
    conn = RawConnection(port)
    try:
        answer = conn.request(
            DescribeGroupsRequest(groups=(GroupId(group),), include_authorized_operations=False)
        )
    finally:
        conn.close()
    (g,) = answer.groups
    return (str(g.group_state), g.protocol_type, g.protocol_data, len(g.members))


def test_worker_group_is_described_as_apache_kafka_describes_it(
    pipeline: Pipeline, apache_kafka: ApacheKafkaBroker, tmp_path: Path
) -> None:
    """The oracle: one worker with no connectors against a real Apache Kafka broker."""
    oracle = ConnectWorker(tmp_path / "oracle", apache_kafka.bootstrap, "connect-oracle")
    try:
        oracle.start()
        assert wait_until(
            lambda: _described(apache_kafka.port, "connect-oracle")[0] == "Stable", 60, 0.5
        ), oracle.log_tail()
        kafka = _described(apache_kafka.port, "connect-oracle")
    finally:
        oracle.stop()
    assert _described(_coordinator(pipeline).port, pipeline.group) == kafka
    assert kafka == ("Stable", "connect", "sessioned", 1)


def test_worker_killed_and_started_again_resumes_from_committed_offsets(
    pipeline: Pipeline,
) -> None:
    worker = pipeline.worker
    before = len(pipeline.out())
    pipeline.append(BATCH)
    # Killed while the batch moves: what was read but not yet committed repeats.
    wait_until(lambda: len(pipeline.out()) > before, 60, 0.05)
    worker.kill()
    pipeline.append(BATCH)  # written while no worker runs
    started = time.monotonic()
    worker.start()
    worker.wait_running(SOURCE)
    worker.wait_running(SINK)
    out = pipeline.wait_all()
    print(f"worker back and caught up in {time.monotonic() - started:.1f}s; "
          f"{len(out) - len(set(out))} lines repeated")  # fmt: skip
    assert _deduplicated(out) == pipeline.expected()
    # At least once, in two stages: the source repeats the lines read after its last
    # offset commit, the sink the records consumed after its last commit; each stage at
    # most the batch in flight at the kill (the earlier one was committed by both).
    assert len(out) - len(set(out)) <= 2 * BATCH


def _node(cluster: Cluster, node_id: int) -> ClusterNode:
    return next(n for n in cluster.nodes if n.node_id == node_id)


def _coordinator(pipeline: Pipeline) -> ClusterNode:
    ids = [n.node_id for n in pipeline.cluster.nodes]
    return _node(pipeline.cluster, choose_node(pipeline.group, -1, ids))


def test_node_killed_and_started_again(pipeline: Pipeline) -> None:
    victim = _coordinator(pipeline)
    repeated = len(pipeline.out()) - len(set(pipeline.out()))
    victim.kill9()
    pipeline.append(BATCH)  # the group and the partition move to the other node
    pipeline.wait_all()
    victim.start()  # and back: rendezvous hashing gives them to it again
    assert wait_until(lambda: _describe_state(pipeline) == "Stable", 60, 0.5)
    pipeline.append(BATCH)
    out = pipeline.wait_all()
    print(f"{len(out) - len(set(out)) - repeated} more lines repeated across the node's kill")
    assert _deduplicated(out) == pipeline.expected()
    for name in (SOURCE, SINK):
        pipeline.worker.wait_running(name, timeout=30)


def _describe_state(pipeline: Pipeline) -> str:
    conn = RawConnection(_coordinator(pipeline).port)
    try:
        described = conn.request(
            DescribeGroupsRequest(
                groups=(GroupId(pipeline.group),), include_authorized_operations=False
            )
        )
    finally:
        conn.close()
    (group,) = described.groups
    return str(group.group_state) if group.error_code == ErrorCode.none else str(group.error_code)
