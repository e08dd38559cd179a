"""`benchmarks/produce.py --security-protocol SASL_SSL`: produce throughput over TLS with
SCRAM-SHA-512 against plaintext, the same broker, the same run: a zonegate node, then
Apache Kafka itself as the reference.

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
vary by seconds per GiB from round to round with what else the machine runs.

Then, unless `--no-java`, the same rounds against Apache Kafka 4.3.1
(tests/apache_kafka.py, one KRaft node, started once the node has stopped) with the
same two listeners: TLS from the same test CA (a PEM keystore), SCRAM-SHA-512 on the
SASL_SSL listener, the controller and inter-broker traffic on PLAINTEXT, the user made
the same way, the same client settings, after one warm-up round left out of the
figures (the JVM compiles its hot paths as they run: a cold first round takes a few
times the CPU per byte); its CPU figures are the broker's java process and the
client's. Kafka's ratio, same client, same machine, is the reference for zonegate's.

The last lines compare the CPU medians (`CPU s/GiB (medians): ...`, then
`apache kafka CPU s/GiB (medians): ...`), then
`apache kafka: produce MB/s over SASL_SSL: X, plaintext Y, ratio R`, and last exactly
`produce MB/s over SASL_SSL: X, plaintext Y, ratio R` (zonegate's).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.security.certs import TestPki

USER, PASSWORD = "bench", "bench-secret"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"

Producer = Callable[[dict[str, Any], str, int, int], dict[str, float]]
JavaPerf = Callable[[dict[str, str], str, int], dict[str, float]]
# Per side, per round: (broker CPU s/GiB, client CPU s/GiB, event loop CPU s/GiB or None).
Cpu = dict[str, list[tuple[float, float, float | None]]]


def _own_cpu_s() -> float:
    """CPU seconds the client has used: this process (Python and librdkafka's threads)
    and its children that ended (the Java client's JVM, run to its end per phase)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _own_writes() -> int:
    """write(2)-family calls this process has made (Linux /proc/self/io's syscw): over TLS
    librdkafka's OpenSSL writes each record with write(2), so this counts its records;
    its plaintext sendmsg(2) calls are not counted."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("syscw:"):
            return int(line.split()[1])
    return 0


def _loop_cpu_s(pid: int) -> float:
    """CPU seconds of a process's main thread (the node's event loop), from Linux /proc."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# Before each phase the broker is left to finish the previous phase's background work:
# a zonegate node rewrites WAL data into stream objects every 5 s
# (zonegate.compaction.interval.ms) in threads of its own, at a few CPU seconds per GiB,
# and a pass that lands inside the next phase was counted as that phase's cost and slowed
# it (the slower side, whose phase is longer, met more of them). So each phase waits at
# least one compaction interval after the last, then until a quiet window.
SETTLE_AFTER_S = 5.5
SETTLE_WINDOW_S = 0.5
SETTLE_IDLE_CPU = 0.1  # at most this fraction of one core over a window counts as quiet
SETTLE_MAX_S = 30.0


def _settle(pid: int, cpu_s: Callable[[int], float], after_s: float) -> float:
    """Waits `after_s`, then until the process tree `pid` uses less than SETTLE_IDLE_CPU
    of a core over SETTLE_WINDOW_S (at most SETTLE_MAX_S in all); the seconds waited."""
    start = time.monotonic()
    time.sleep(after_s)
    while time.monotonic() - start < SETTLE_MAX_S:
        before = cpu_s(pid)
        time.sleep(SETTLE_WINDOW_S)
        if cpu_s(pid) - before < SETTLE_IDLE_CPU * SETTLE_WINDOW_S:
            break
    return time.monotonic() - start


def _create_user(bootstrap: str) -> Any:
    """The SCRAM-SHA-512 user, made with AlterUserScramCredentials over the PLAINTEXT
    listener as an operator would; the admin client, for the topics."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    return admin


def _secure_conf(bootstrap: str, ca: Path) -> dict[str, Any]:
    from tests.security.client_configs import confluent

    return confluent(_login(bootstrap, ca))


def _login(bootstrap: str, ca: Path) -> Any:
    from tests.security.client_configs import Login

    return Login(
        bootstrap, "SASL_SSL", ca=ca, mechanism="SCRAM-SHA-512", username=USER, password=PASSWORD
    )


# Per client: (MB/s per side per round, CPU per side per round).
Measured = dict[str, tuple[dict[str, list[float]], Cpu]]


def _both_clients(
    args: argparse.Namespace,
    clients: dict[str, Producer],
    broker: str,
    pid: int,
    admin: Any,
    plain: str,
    secure: str,
    ca: Path,
    warmup: int = 0,
) -> Measured:
    """The rounds with confluent-kafka, then (when given) with Apache Kafka's Java
    producer, each side of each with the same client settings but for security."""
    from tests.security.client_configs import java

    measured: Measured = {}
    for client, producer in clients.items():
        if client == "java":
            secure_conf: dict[str, Any] = {"bootstrap.servers": secure, **java(_login(secure, ca))}
        else:
            secure_conf = _secure_conf(secure, ca)
        sides = {"SASL_SSL": secure_conf, "plaintext": {"bootstrap.servers": plain}}
        measured[client] = _rounds(
            args, producer, broker, pid, admin, sides, warmup if not measured else 0, client
        )
    return measured


def _rounds(
    args: argparse.Namespace,
    run_producer: Producer,
    broker: str,
    pid: int,
    admin: Any,
    sides: dict[str, dict[str, Any]],
    warmup: int = 0,
    client: str = "confluent-kafka",
) -> tuple[dict[str, list[float]], Cpu]:
    """`warmup` rounds left out of the figures, then `--security-rounds` rounds, of each
    side in turn on the broker process `pid`: MB/s and CPU s/GiB per round (the event
    loop's only for a zonegate node)."""
    from confluent_kafka.admin import NewTopic

    from benchmarks.cpu_time import cpu_s

    results: dict[str, list[float]] = {name: [] for name in sides}
    # CPU seconds per GiB produced per round: on a shared machine throughput follows
    # the other jobs, CPU time per byte much less.
    cpu: Cpu = {name: [] for name in sides}
    gib = args.records * 1024 / 2**30
    zonegate = broker == "zonegate"
    label = ("" if zonegate else f"{broker}, ") + f"{client} "
    for i in range(-warmup, args.security_rounds):
        # Each side goes first in every other round, so neither always follows the other.
        order = list(sides.items()) if (i + warmup) % 2 == 0 else list(sides.items())[::-1]
        for name, conf in order:
            topic = f"bench-{client}-{name.lower()}-{i + warmup}"
            admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
            settled = _settle(pid, cpu_s, SETTLE_AFTER_S if zonegate else 0.0)
            node0, client0, writes0 = cpu_s(pid), _own_cpu_s(), _own_writes()
            loop0 = _loop_cpu_s(pid) if zonegate else 0.0
            r = run_producer(conf, topic, args.records, args.partitions)
            node_cpu = (cpu_s(pid) - node0) / gib
            loop_cpu = (_loop_cpu_s(pid) - loop0) / gib if zonegate else None
            client_cpu = (_own_cpu_s() - client0) / gib
            writes = (_own_writes() - writes0) / (args.records * 1024 / 1e6)
            if i >= 0:
                results[name].append(r["mb_s"])
                cpu[name].append((node_cpu, client_cpu, loop_cpu))
            own = (
                f"node {node_cpu:.2f} (event loop {loop_cpu:.2f})"
                if loop_cpu is not None
                else f"broker {node_cpu:.2f}"
            )
            # The Java client's writes are its JVM's: /proc/self/io counts a reaped child's
            # too, but the JVM's own file and pipe writes with them, so they are not shown.
            own_writes = (
                f"; client writes per MB {writes:.0f}" if client != "java" and writes >= 1 else ""
            )
            which = f"warm-up {i + warmup + 1}" if i < 0 else f"round {i + 1}"
            print(
                f"{label}{which}: {name:9s} {r['mb_s']:8.1f} MB/s ({args.records} x 1024 B"
                f" in {r['seconds']:.1f} s; p50 {r['p50_ms']:.1f} ms p99"
                f" {r['p99_ms']:.1f} ms at full speed; CPU s/GiB: {own}, client"
                f" {client_cpu:.2f}{own_writes}; broker settled in"
                f" {settled:.1f} s; load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    return results, cpu


def _zonegate(
    args: argparse.Namespace, clients: dict[str, Producer], tmp: Path, pki: TestPki
) -> Measured:
    from tests.security.secure_node import SecureNode, security_properties

    node = SecureNode(tmp / "node", ("PLAINTEXT", "SASL_SSL"))
    node.write_config(security_properties(pki, node.ports, None))
    node.start()
    try:
        admin = _create_user(node.bootstrap)
        assert node.proc is not None
        measured = _both_clients(
            args, clients, "zonegate", node.proc.pid, admin, node.bootstrap,
            node.bootstrap_of("SASL_SSL"), pki.ca_file,
        )  # fmt: skip
        del admin  # gone before the node stops, so it does not log the lost connection
        return measured
    finally:
        node.stop()


def _pkcs8_keystore(pem: Path, out: Path) -> Path:
    """`pem` (trustme's key, SEC1, then the chain) rewritten with the key in PKCS#8, the
    one key encoding Kafka's `ssl.keystore.type=PEM` reads."""
    from cryptography.hazmat.primitives import serialization

    text = pem.read_bytes()
    key = serialization.load_pem_private_key(text, None).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    chain = re.findall(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n?", text, re.S)
    out.write_bytes(key + b"".join(chain))
    return out


def _apache_kafka(
    args: argparse.Namespace, clients: dict[str, Producer], tmp: Path, pki: TestPki
) -> Measured:
    from confluent_kafka.admin import AdminClient

    from tests.apache_kafka import ApacheKafkaBroker
    from tests.node_harness import free_port_block

    keystore = _pkcs8_keystore(pki.server_pem, tmp / "kafka-server.pem")

    class SaslSslKafka(ApacheKafkaBroker):
        """Kafka with a SASL_SSL listener (SCRAM-SHA-512) beside its PLAINTEXT one."""

        sasl_port = 0

        def _write_config(self) -> Path:
            path = super()._write_config()
            self.sasl_port = free_port_block(1)
            plain = f"PLAINTEXT://127.0.0.1:{self.port}"
            secure = f"SASL_SSL://127.0.0.1:{self.sasl_port}"
            settings = dict(line.split("=", 1) for line in path.read_text().splitlines())
            settings.update(
                {
                    "listeners": f"{plain},{secure},CONTROLLER://127.0.0.1:{self.controller_port}",
                    "advertised.listeners": f"{plain},{secure}",
                    "listener.security.protocol.map": (
                        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL"
                    ),
                }
            )
            path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
            return path

    broker = SaslSslKafka(
        tmp / "kafka",
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca_file),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_MODULE,
        },
    )
    broker.start()
    try:
        admin = _create_user(broker.bootstrap)
        secure = _secure_conf(f"127.0.0.1:{broker.sasl_port}", pki.ca_file)
        # The credential reaches the broker through the metadata log: wait until a
        # SASL_SSL client gets in (librdkafka retries a failed login until the timeout).
        AdminClient(secure).list_topics(timeout=60)
        assert broker.proc is not None
        # One round first, left out: the JVM compiles its hot paths (TLS, the log's
        # appends) as they run, and its first round takes a few times the CPU per byte.
        measured = _both_clients(
            args, clients, "apache kafka", broker.proc.pid, admin, broker.bootstrap,
            f"127.0.0.1:{broker.sasl_port}", pki.ca_file, warmup=1,
        )  # fmt: skip
        del admin
        return measured
    finally:
        broker.stop()


def _medians(cpu: Cpu) -> dict[str, list[float]]:
    return {
        name: [statistics.median(c[k] or 0.0 for c in rounds) for k in (0, 1, 2)]
        for name, rounds in cpu.items()
    }


def _ratio_line(results: dict[str, list[float]]) -> str:
    secured = statistics.median(results["SASL_SSL"])
    plaintext = statistics.median(results["plaintext"])
    return (
        f"produce MB/s over SASL_SSL: {secured:.1f}, plaintext {plaintext:.1f}, "
        f"ratio {secured / plaintext:.2f}"
    )


def _cpu_line(label: str, cpu: Cpu, zonegate: bool) -> str:
    med = _medians(cpu)
    (sn, sc, sl), (pn, pc, pl) = med["SASL_SSL"], med["plaintext"]
    if zonegate:
        return (
            f"{label}CPU s/GiB (medians): SASL_SSL node {sn:.2f} (event loop {sl:.2f}) + client"
            f" {sc:.2f}, plaintext node {pn:.2f} (event loop {pl:.2f}) + client {pc:.2f}; node"
            f" ratio {pn / sn:.2f}, event loop ratio {pl / sl:.2f}, node+client ratio"
            f" {(pn + pc) / (sn + sc):.2f}"
        )
    return (
        f"{label}CPU s/GiB (medians): SASL_SSL broker {sn:.2f} + client {sc:.2f}, plaintext"
        f" broker {pn:.2f} + client {pc:.2f}; broker ratio {pn / sn:.2f}, broker+client ratio"
        f" {(pn + pc) / (sn + sc):.2f}"
    )


def run(args: argparse.Namespace, run_producer: Producer, java_perf: JavaPerf) -> None:
    clients: dict[str, Producer] = {"confluent-kafka": run_producer}
    if args.java:
        clients["java"] = lambda conf, topic, records, _partitions: java_perf(conf, topic, records)
    with tempfile.TemporaryDirectory(prefix="zonegate-bench-sasl-") as tmp:
        from tests.security.certs import TestPki

        pki = TestPki(Path(tmp) / "pki")
        zonegate = _zonegate(args, clients, Path(tmp), pki)
        kafka = _apache_kafka(args, clients, Path(tmp), pki) if args.java else {}
    # When the node and its client share a machine's cores, the throughput they reach
    # together is that of their CPU time per byte: compare the sums too.
    for client, (_, cpu) in zonegate.items():
        print(_cpu_line(f"{client}: ", cpu, zonegate=True))
    for client, (_, cpu) in kafka.items():
        print(_cpu_line(f"apache kafka, {client}: ", cpu, zonegate=False))
    for client, (results, _) in kafka.items():
        print(f"apache kafka, {client}: {_ratio_line(results)}")
    if "java" in zonegate:
        print(f"java: {_ratio_line(zonegate['java'][0])}")
    print(_ratio_line(zonegate["confluent-kafka"][0]))
