"""Issue 25's demonstration of TLS between nodes and to the stores: a 3-zone cluster of
`zonegate node` processes on PostgreSQL over TLS (sslmode=verify-full) and moto's S3 over
HTTPS (a CA bundle), the nodes talking over mutual TLS, each with its own certificate of
the cluster's CA (trustme's):

- produce in one zone and consume in a group in another: the leader RPC and the group
  forwarding cross nodes, over mutual TLS only;
- a node with a certificate of another CA cannot take part: it refuses to start naming
  the peer that refused it and why, whether it trusts the other CA or the cluster's;
- leader calls without a valid client certificate (none, another CA's, plaintext) are
  refused in the handshake, the cluster's token in hand or not, and nothing is appended;
- a node's certificate rotated in place is what new connections get, with no restart;
- a node whose PostgreSQL CA is wrong refuses to start with one line saying so.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import asyncpg
import grpc
import pytest
import trustme
from confluent_kafka import Consumer

from tests.cluster_harness import ClusterNode
from tests.e2e.clients import ck_create_topic, ck_produce
from tests.e2e.records_fixture import make_records
from tests.postgres_server import PostgresServer
from tests.s3_server import FAKE_AWS_ENV, MotoS3Server
from zonegate.leader_forwarder.proto import leader_pb2 as pb

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
ZONES = ("zone-a", "zone-b", "zone-c")


def identity(root: Path, name: str, ca: trustme.CA, trusted: trustme.CA) -> list[str]:
    """A node's mutual-TLS flags: its keystore (a certificate of `ca`) and truststore."""
    cert = ca.issue_cert("127.0.0.1", "localhost", common_name=name)
    keystore, truststore = root / f"{name}.pem", root / f"{name}-ca.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    trusted.cert_pem.write_to_path(str(truststore))
    return [
        "--rpc-ssl-keystore-location", str(keystore),
        "--rpc-ssl-truststore-location", str(truststore),
    ]  # fmt: skip


def node_args(root: Path, node_id: int, zone: str, meta: str, s3: MotoS3Server) -> list[str]:
    return [
        "--listen", "127.0.0.1:0", "--http-port", "0", "--node-id", str(node_id),
        "--zone", zone, "--data-dir", str(root / f"node-{node_id}"), "--metastore", meta,
        "--object-store", "s3://zonegate-test/tls", "--s3-endpoint", s3.endpoint_url,
        "--s3-ca-bundle", str(s3.ca_file), "--num-partitions", "6", "--lease-ms", "3000",
        # The one group here has one member: its first assignment not held 3 s for more.
        "--group-initial-rebalance-delay-ms", "0",
    ]  # fmt: skip


def refused_start(args: list[str], log: Path) -> tuple[int, str]:
    """A node expected not to start: its exit code and what it said on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "zonegate", "node", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **FAKE_AWS_ENV},
    )
    log.write_text(done.stderr)
    assert "zonegate listening" not in done.stdout
    return done.returncode, done.stderr


async def rpc_ports(meta: str) -> dict[int, int]:
    conn = await asyncpg.connect(meta)
    try:
        rows = await conn.fetch("SELECT node_id, rpc_port FROM nodes")
        token = await conn.fetchval("SELECT value FROM cluster_secrets WHERE name = 'rpc-token'")
    finally:
        await conn.close()
    return {int(r["node_id"]): int(r["rpc_port"]) for r in rows} | {-1: token}


async def raw_append(port: int, credentials: grpc.ChannelCredentials | None, token: str) -> str:
    """An Append over a raw gRPC channel: the status it ended with."""
    target = f"127.0.0.1:{port}"
    channel = (
        grpc.aio.secure_channel(target, credentials)
        if credentials is not None
        else grpc.aio.insecure_channel(target)
    )
    async with channel:
        append = channel.unary_unary(
            "/zonegate.leader.v1.Leader/Append",
            request_serializer=pb.AppendRequest.SerializeToString,
            response_deserializer=pb.AppendResponse.FromString,
        )
        try:
            await append(
                pb.AppendRequest(
                    object_keys=["forged"],
                    batches=[pb.BatchSummary(stream_id=1, length=10, record_count=1)],
                ),
                metadata=(("zonegate-rpc-token", token),),
                timeout=5,
            )
        except grpc.aio.AioRpcError as exc:
            return exc.code().name
    return "OK"


def served_name(port: int, keystore: Path, truststore: Path) -> str:
    """The common name of the certificate a node's RPC listener gives a new connection."""
    ctx = ssl.create_default_context(cafile=str(truststore))
    ctx.load_cert_chain(keystore)
    ctx.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        subject = dict(x[0] for x in tls.getpeercert()["subject"])  # type: ignore[index]
        return str(subject["commonName"])


def group_read(bootstrap: str, topic: str, count: int, zone: str) -> list[bytes | None]:
    """A consumer in a group, subscribed, reading `count` records and committing."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tls-readers",
            "client.id": f"reader,zonegate_az={zone}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    seen: list[bytes | None] = []
    deadline = time.monotonic() + 90
    while len(seen) < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    return seen


def test_three_zones_over_mutual_tls_on_postgres_and_s3_over_tls(tmp_path: Path) -> None:
    cluster_ca, other_ca, store_ca = trustme.CA(), trustme.CA(), trustme.CA()
    certs = tmp_path / "certs"
    certs.mkdir()
    with (
        PostgresServer(ca=store_ca) as pg,
        MotoS3Server(ca=store_ca) as s3,
    ):
        base_url = pg.new_database()
        meta = f"{base_url}?sslmode=verify-full&sslrootcert={pg.ca_file}"
        nodes: list[ClusterNode] = []
        try:
            for i, zone in enumerate(ZONES, 1):
                args = node_args(tmp_path, i, zone, meta, s3)
                args += identity(certs, f"node-{i}", cluster_ca, cluster_ca)
                nodes.append(
                    ClusterNode(i, zone, args, tmp_path / f"node-{i}.log", env=FAKE_AWS_ENV)
                )
                nodes[-1].start()
            time.sleep(1.0)  # every node has seen the others' leases

            # Produce in zone a; six partitions led across the three nodes, so the
            # appends and index reads cross nodes over the leader RPC.
            topic = "over-mtls"
            ck_create_topic(nodes[0].bootstrap, topic, 6)
            recs = make_records(60, "tls")
            ck_produce(
                nodes[0].bootstrap, topic, recs, 6, extra={"client.id": "p,zonegate_az=zone-a"}
            )
            got = group_read(nodes[2].bootstrap, topic, 60, "zone-c")
            assert Counter(got) == Counter(r.value for r in recs)
            forwarded = sum(
                v
                for n in nodes
                for name, labels, v in n.metrics()
                if name == "zonegate_traffic_sent_bytes_total" and labels["kind"] == "forward_rpc"
            )
            assert forwarded > 0, "the nodes called each other"

            # A node with a certificate of another CA cannot take part, whichever CA it
            # trusts: the cluster's (refused by its own check) or the other.
            for n, trusted, said in (
                (4, other_ca, "cannot join the cluster over mutual TLS"),
                (5, cluster_ca, "its certificate is not signed by the CA"),
            ):
                args = node_args(tmp_path, n, "zone-a", meta, s3)
                args += identity(certs, f"rogue-{n}", other_ca, trusted)
                code, stderr = refused_start(args, tmp_path / f"node-{n}.log")
                lines = [line for line in stderr.splitlines() if line.startswith("zonegate node:")]
                assert code == 2 and len(lines) == 1 and said in lines[0], stderr
                if n == 4:  # names the peers that refused it, and why
                    assert "node 1 at 127.0.0.1:" in lines[0], lines[0]

            # Leader calls without a valid client certificate are refused, token or not.
            ports = asyncio.run(rpc_ports(base_url))
            token = str(ports.pop(-1))
            assert set(ports) == {1, 2, 3}, "the refused nodes never registered"
            rogue = other_ca.issue_cert("127.0.0.1")
            attempts = {
                "no certificate": grpc.ssl_channel_credentials(cluster_ca.cert_pem.bytes()),
                "another CA's": grpc.ssl_channel_credentials(
                    cluster_ca.cert_pem.bytes(),
                    rogue.private_key_pem.bytes(),
                    rogue.cert_chain_pems[0].bytes(),
                ),
                "plaintext": None,
            }
            for port in ports.values():
                for what, creds in attempts.items():
                    status = asyncio.run(raw_append(port, creds, token))
                    assert status == "UNAVAILABLE", (what, status)
            assert all(n.alive() for n in nodes), "refusing peers does not stop a node"

            # The cluster still serves after all that.
            ck_produce(nodes[1].bootstrap, topic, recs[:6], 6)

            # Node 1's certificate rotated in place (a Secret's files swapped): new
            # connections to it get the new one, its calls present it, no restart.
            keystore = certs / "node-1.pem"
            staged = certs / "node-1.next"
            rotated = cluster_ca.issue_cert("127.0.0.1", common_name="node-1-rotated")
            rotated.private_key_and_cert_chain_pem.write_to_path(str(staged))
            os.replace(staged, keystore)
            time.sleep(1.1)  # channels look at the files once a second
            ck_produce(
                nodes[0].bootstrap, topic, recs[:12], 6, extra={"client.id": "p,zonegate_az=zone-a"}
            )
            assert served_name(ports[1], certs / "node-2.pem", certs / "node-2-ca.pem") == (
                "node-1-rotated"
            )
            assert "RPC certificates re-read" in nodes[0].log_path.read_text()

            # PostgreSQL's CA wrong: refused at start in one line.
            other_file = certs / "pg-wrong-ca.pem"
            other_ca.cert_pem.write_to_path(str(other_file))
            wrong = f"{base_url}?sslmode=verify-full&sslrootcert={other_file}"
            args = node_args(tmp_path, 6, "zone-b", wrong, s3)
            args += identity(certs, "node-6", cluster_ca, cluster_ca)
            code, stderr = refused_start(args, tmp_path / "node-6.log")
            last = stderr.strip().splitlines()[-1]
            assert code == 2 and "its TLS certificate is not trusted" in last, stderr
        finally:
            for n in nodes:
                n.stop()
