"""A node with two processes serving its listener (`--workers 2`, docs/cores.md):
real clients (confluent-kafka and kafka-python) produce, fetch and use consumer
groups with their connections landing on both processes; the node shows one
/metrics and one set of usage records, each byte counted once; a worker killed
with SIGKILL is started again by the node process and nothing acknowledged is lost.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from tests.cluster_harness import ClusterNode, start_cluster, wait_until
from zonegate.analytics.facts import arrow_facts
from zonegate.analytics.source import locate

pytestmark = pytest.mark.e2e


def _metric(node: ClusterNode, name: str) -> dict[str, float]:
    """`name`'s series by their labels other than node (as "k=v,..."), from /metrics."""
    out: dict[str, float] = {}
    for n, labels, value in node.metrics():
        if n == name:
            key = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "node")
            out[key] = out.get(key, 0.0) + value
    return out


def _workers_of(pid: int) -> list[int]:
    """The node process's children: its workers."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children.append(int(entry))
    return children


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _consume_confluent(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def test_two_workers_serve_real_clients_with_one_metrics_and_one_usage(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, ["a"], 1, ["--workers", "2", "--usage-interval-s", "60"])
    node = cluster.nodes[0]
    try:
        assert _metric(node, "zonegate_workers") == {"": 2.0}
        _create(node.bootstrap, "orders", 6)
        sent = [f"order {i}".encode() for i in range(3000)]
        # Producers kept open until both processes hold some of their connections: each
        # connection goes to whichever process accepts it first.
        producers: list[Producer] = []
        while len(producers) < 24:
            p = Producer(
                {"bootstrap.servers": node.bootstrap, "enable.idempotence": True, "acks": "all"}
            )
            producers.append(p)
            for v in sent[len(producers) - 1 :: 24]:
                p.produce("orders", v)
            assert p.flush(30) == 0
            per_process = _metric(node, "zonegate_process_connections")
            if len(producers) >= 4 and all(v > 0 for v in per_process.values()):
                break
        assert sorted(per_process) == ["process=0", "process=1"]
        assert all(v > 0 for v in per_process.values()), per_process
        for k in range(len(producers), 24):  # the values of the producers not opened
            for v in sent[k::24]:
                producers[0].produce("orders", v)
        assert producers[0].flush(30) == 0
        kp = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all")
        extra = [f"kp {i}".encode() for i in range(500)]
        for v in extra:
            kp.send("orders", v)
        kp.flush(30)
        # Confluent's group, then kafka-python's: their coordinator is in the node
        # process, reached from a worker over the leader RPC.
        got = _consume_confluent(node.bootstrap, "orders", "billing", len(sent) + len(extra))
        assert sorted(got) == sorted(sent + extra)
        assert len(got) == len(set(got))
        kc = KafkaConsumer(
            "orders",
            bootstrap_servers=node.bootstrap,
            group_id="audit",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=20000,
        )
        seen: list[bytes] = []
        for m in kc:
            seen.append(m.value)
            if len(seen) == len(got):
                break
        kc.commit()
        kc.close()
        assert sorted(seen) == sorted(got)
        # DescribeLogDirs tells the same sizes whichever process answers (a worker
        # holds no partition: it reads them from the index in the store).
        sizes = set()
        for _ in range(6):
            admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
            (answer,) = admin.describe_log_dirs()
            admin.close()
            (topic,) = answer["log_dirs"][0]["topics"]
            sizes.add(tuple(p["partition_size"] for p in topic["partitions"]))
        assert len(sizes) == 1 and sum(next(iter(sizes))) > len(got) * 6, sizes
        # One /metrics: the produce bytes both processes took, counted once.
        produced = sum(
            v
            for k, v in _metric(node, "zonegate_traffic_received_bytes_total").items()
            if "kind=produce_data" in k
        )
        assert produced > len(got) * 6  # every record's value at least
        assert not any(
            "kind=forward_rpc" in k for k in _metric(node, "zonegate_traffic_received_bytes_total")
        ), "a worker's calls to its own node are not traffic"
        for p in producers:
            p.flush(10)
        kp.close()
        del producers
        node.stop()  # every process writes its last usage records
        facts = arrow_facts(locate((tmp_path / "objects").resolve().as_uri())).to_pylist()
        usage_produced = sum(f["bytes_in"] for f in facts if f["kind"] == "produce_data")
        assert usage_produced == produced
        assert not [f for f in facts if f["kind"] == "forward_rpc"]
        files = list((tmp_path / "objects" / "usage").rglob("*.parquet"))
        assert len(files) >= 2  # the node process's and the worker's
    finally:
        cluster.stop()


def test_a_killed_worker_is_restarted_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, ["a"], 1, ["--workers", "2"])
    node = cluster.nodes[0]
    try:
        _create(node.bootstrap, "payments", 4)
        assert node.proc is not None
        (worker,) = _workers_of(node.proc.pid)
        acked: list[bytes] = []
        failed: list[str] = []
        stop = threading.Event()

        def on_delivery(err: object, msg: object) -> None:
            if err is None:
                acked.append(msg.value())  # type: ignore[attr-defined]
            else:
                failed.append(str(err))

        def produce() -> None:
            # Several producers, so some hold connections to the worker when it dies.
            ps = [
                Producer(
                    {
                        "bootstrap.servers": node.bootstrap,
                        "enable.idempotence": True,
                        "acks": "all",
                        "message.timeout.ms": 60000,
                    }
                )
                for _ in range(6)
            ]
            i = 0
            while not stop.is_set():
                for p in ps:
                    p.produce("payments", f"pay {i}".encode(), on_delivery=on_delivery)
                    p.poll(0)
                    i += 1
                time.sleep(0.005)
            for p in ps:
                p.flush(60)

        t = threading.Thread(target=produce)
        t.start()
        try:
            assert wait_until(lambda: len(acked) > 500, 30)
            os.kill(worker, signal.SIGKILL)
            assert wait_until(
                lambda: _metric(node, "zonegate_worker_restarts_total") == {"": 1.0}, 30
            )
            assert wait_until(lambda: _metric(node, "zonegate_workers") == {"": 2.0}, 30)
            (again,) = _workers_of(node.proc.pid)
            assert again != worker
            before = len(acked)
            assert wait_until(lambda: len(acked) > before + 500, 30)  # serving on
        finally:
            stop.set()
            t.join(90)
        assert not failed, failed[:5]
        got = _consume_confluent(node.bootstrap, "payments", "check", len(acked))
        missing = set(acked) - set(got)
        assert not missing, f"{len(missing)} acknowledged records lost"
        assert len(got) == len(set(got)), "an idempotent producer's retry was written twice"
    finally:
        cluster.stop()


def test_workers_go_with_their_node_process_and_free_its_port(tmp_path: Path) -> None:
    """A node process killed with SIGKILL leaves no worker serving on its own: its
    workers close the shared listener and exit, and the node started again takes the
    same port, with what was acknowledged before."""
    cluster = start_cluster(tmp_path, ["a"], 1, ["--workers", "2"])
    node = cluster.nodes[0]
    try:
        _create(node.bootstrap, "ledger", 2)
        p = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
        sent = [f"entry {i}".encode() for i in range(200)]
        for v in sent:
            p.produce("ledger", v)
        assert p.flush(30) == 0
        del p
        assert node.proc is not None
        (worker,) = _workers_of(node.proc.pid)
        port = node.port
        node.kill9()
        assert wait_until(lambda: not Path(f"/proc/{worker}").exists(), 15)
        node.args[node.args.index("--listen") + 1] = f"127.0.0.1:{port}"
        node.start()
        assert node.port == port
        got = _consume_confluent(node.bootstrap, "ledger", "after", len(sent))
        assert sorted(got) == sorted(sent)
    finally:
        cluster.stop()


def test_tls_and_sasl_listeners_are_served_by_both_processes(tmp_path: Path) -> None:
    """SASL_SSL (PLAIN) on a node of two processes: each process makes its listener's
    TLS context and authentication from the same settings, so a client is served the
    same whichever process accepted its connection."""
    from tests.node_harness import free_port_block
    from tests.security.certs import TestPki
    from tests.security.client_configs import Login, confluent
    from tests.security.roundtrip import VALUES, roundtrip
    from tests.security.secure_node import PLAIN_USERS, security_properties

    pki = TestPki(tmp_path / "pki")
    base = free_port_block(2)
    ports = {"PLAINTEXT": base, "SASL_SSL": base + 1}
    props = security_properties(pki, ports, None)
    props["sasl.enabled.mechanisms"] = "PLAIN"
    for key in [k for k in props if "scram" in k]:
        del props[key]
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    args = ["--node-id", "1", "--zone", "a", "--data-dir", str(tmp_path / "node")]
    args += ["--http-port", "0", "--config", str(config), "--workers", "2"]
    node = ClusterNode(1, "a", args, tmp_path / "node.log")
    node.start()
    try:
        login = Login(
            f"127.0.0.1:{ports['SASL_SSL']}",
            "SASL_SSL",
            ca=pki.ca_file,
            mechanism="PLAIN",
            username="alice",
            password=PLAIN_USERS["alice"],
        )
        # Clients kept open until both processes hold some of their connections.
        held: list[Producer] = []
        while len(held) < 24:
            held.append(Producer(confluent(login)))
            held[-1].list_topics(timeout=30)
            per_process = _metric(node, "zonegate_process_connections")
            if len(held) >= 4 and all(v > 0 for v in per_process.values()):
                break
        assert all(v > 0 for v in per_process.values()), per_process
        for i in range(3):
            assert roundtrip("confluent-kafka", login, f"secure-{i}", f"g{i}") == sorted(VALUES)
        del held
    finally:
        node.stop()


def test_transactions_through_both_processes(tmp_path: Path) -> None:
    """Transactional producers whose connections land on either process: a worker
    passes their coordinator calls to the node process, which holds the shards."""
    cluster = start_cluster(tmp_path, ["a"], 1, ["--workers", "2"])
    node = cluster.nodes[0]
    try:
        _create(node.bootstrap, "payments", 3)
        # Every shard held by the node process first: from then on, no answer of this
        # one-node cluster may say NOT_COORDINATOR (a worker answering for its own idle
        # role instance did, slowing each such producer's calls by its retries).
        assert wait_until(lambda: _metric(node, "zonegate_txn_shards_held") == {"": 50.0}, 30)
        producers: list[Producer] = []
        committed: list[bytes] = []
        # Every producer opens (their coordinator connections must land on both
        # processes), each within a bound far below a stuck call's.
        while len(producers) < 12:
            p = Producer(
                {"bootstrap.servers": node.bootstrap, "transactional.id": f"tx-{len(producers)}"}
            )
            producers.append(p)
            p.init_transactions(20)
            p.begin_transaction()
            p.produce("payments", f"aborted {len(producers)}".encode())
            p.abort_transaction(30)
            p.begin_transaction()
            values = [f"paid {len(producers)}-{i}".encode() for i in range(3)]
            for v in values:
                p.produce("payments", v)
            p.commit_transaction(30)
            committed += values
        per_process = _metric(node, "zonegate_process_connections")
        assert sorted(per_process) == ["process=0", "process=1"]
        assert all(v > 0 for v in per_process.values()), per_process
        c = Consumer(
            {
                "bootstrap.servers": node.bootstrap,
                "group.id": "ledger",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        c.subscribe(["payments"])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(committed) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        extra = c.consume(num_messages=100, timeout=2)  # nothing aborted comes after
        got += [m.value() for m in extra if m.error() is None]
        c.close()
        assert sorted(got) == sorted(committed)
        refused = {
            k: v
            for k, v in _metric(node, "zonegate_errors_total").items()
            if "error=not_coordinator" in k
        }
        assert not refused, refused
        for p in producers:
            p.flush(10)
    finally:
        cluster.stop()
