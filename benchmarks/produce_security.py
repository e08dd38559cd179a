"""`benchmarks/produce.py --security-protocol SASL_SSL`: produce throughput over TLS with
SCRAM-SHA-512 against plaintext, the same node, the same run.

One node (`serve --zones zone-a`, local store) with two listeners, PLAINTEXT and
SASL_SSL (tests/security: a trustme CA and server certificate, SCRAM-SHA-512 enabled);
the SCRAM user is created with AlterUserScramCredentials, as an operator would. Then
`--security-rounds` rounds, each measuring SASL_SSL then plaintext with produce.py's
throughput phase (confluent-kafka, 1 KiB records, acks=all, idempotent), each on a
topic of its own; the median round of each is reported, so that a stall of the shared
machine lands on both sides alike. Each round also reports the CPU seconds per GiB
produced of the node and of the client (this process: Python and librdkafka's
threads), and of the node's event-loop thread alone: TLS and SASL run there, while the
node's other threads (WAL and compaction files) do the same work on both sides and
vary by seconds per GiB from round to round with what else the machine runs. A line
before the last compares their medians: on a busy machine those hold when the
throughput does not. The last line is exactly
`produce MB/s over SASL_SSL: X, plaintext Y, ratio R`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

USER, PASSWORD = "bench", "bench-secret"

Producer = Callable[[dict[str, Any], str, int, int], dict[str, float]]


def _own_cpu_s() -> float:
    """CPU seconds this process (the client: Python and librdkafka's threads) has used."""
    t = os.times()
    return t.user + t.system


def _loop_cpu_s(pid: int) -> float:
    """CPU seconds of a process's main thread (the node's event loop), from Linux /proc."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(args: argparse.Namespace, run_producer: Producer) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        NewTopic,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from benchmarks.cpu_time import cpu_s as _cpu_s
    from tests.security.certs import TestPki
    from tests.security.client_configs import Login, confluent
    from tests.security.secure_node import SecureNode, security_properties

    with tempfile.TemporaryDirectory(prefix="zonegate-bench-sasl-") as tmp:
        pki = TestPki(Path(tmp) / "pki")
        node = SecureNode(Path(tmp) / "node", ("PLAINTEXT", "SASL_SSL"))
        node.write_config(security_properties(pki, node.ports, None))
        node.start()
        try:
            plain = {"bootstrap.servers": node.bootstrap}
            admin = AdminClient(plain)
            upsert = UserScramCredentialUpsertion(
                USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode()
            )
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(30)
            secure = confluent(
                Login(
                    node.bootstrap_of("SASL_SSL"),
                    "SASL_SSL",
                    ca=pki.ca_file,
                    mechanism="SCRAM-SHA-512",
                    username=USER,
                    password=PASSWORD,
                )
            )
            sides = {"SASL_SSL": secure, "plaintext": plain}
            results: dict[str, list[float]] = {name: [] for name in sides}
            # CPU seconds per GiB produced, (node, client) per round: on a shared machine
            # throughput follows the other jobs, CPU time per byte much less.
            cpu: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
            gib = args.records * 1024 / 2**30
            assert node.proc is not None
            for i in range(args.security_rounds):
                for name, conf in sides.items():
                    topic = f"bench-{name.lower()}-{i}"
                    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
                    pid = node.proc.pid
                    node0, loop0, client0 = _cpu_s(pid), _loop_cpu_s(pid), _own_cpu_s()
                    r = run_producer(conf, topic, args.records, args.partitions)
                    node_cpu = (_cpu_s(pid) - node0) / gib
                    loop_cpu = (_loop_cpu_s(pid) - loop0) / gib
                    client_cpu = (_own_cpu_s() - client0) / gib
                    results[name].append(r["mb_s"])
                    cpu[name].append((node_cpu, client_cpu, loop_cpu))
                    print(
                        f"round {i + 1}: {name:9s} {r['mb_s']:8.1f} MB/s ({args.records} x 1024 B"
                        f" in {r['seconds']:.1f} s; p50 {r['p50_ms']:.1f} ms p99"
                        f" {r['p99_ms']:.1f} ms at full speed; CPU s/GiB: node {node_cpu:.2f}"
                        f" (event loop {loop_cpu:.2f}), client {client_cpu:.2f}; load average"
                        f" {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
            del admin
        finally:
            node.stop()
    # When the node and its client share a machine's cores, the throughput they reach
    # together is that of their CPU time per byte: compare the sums too.
    med = {name: [statistics.median(c[k] for c in cpu[name]) for k in (0, 1, 2)] for name in cpu}
    (sn, sc, sl), (pn, pc, pl) = med["SASL_SSL"], med["plaintext"]
    print(
        f"CPU s/GiB (medians): SASL_SSL node {sn:.2f} (event loop {sl:.2f}) + client {sc:.2f}, "
        f"plaintext node {pn:.2f} (event loop {pl:.2f}) + client {pc:.2f}; node ratio "
        f"{pn / sn:.2f}, event loop ratio {pl / sl:.2f}, node+client ratio "
        f"{(pn + pc) / (sn + sc):.2f}"
    )
    secured = statistics.median(results["SASL_SSL"])
    plaintext = statistics.median(results["plaintext"])
    print(
        f"produce MB/s over SASL_SSL: {secured:.1f}, plaintext {plaintext:.1f}, "
        f"ratio {secured / plaintext:.2f}"
    )
