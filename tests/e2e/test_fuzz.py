"""No byte sequence a client sends can crash, hang or bloat a node (issue 12).

A real node process is sent the frames of issue 12 (the 31-byte
CreatePartitions frame that made kio's native reader abort the process, null
arrays) and then a seeded fuzz run: random, truncated, length-corrupted and
mutated frames of every API the node serves, mutated from real clients'
frames (captured by the node itself, ZONEGATE_CAPTURE_FRAMES) and from
synthetic requests. After every thousand frames: the process is alive, a
confluent-kafka producer and consumer still produce and read back, and the
node logged nothing at ERROR and no traceback. The leader's gRPC port and
the HTTP port get the same treatment in their own protocols. Secured listeners
(issue 25): SaslHandshake and SaslAuthenticate frames before and after a real login,
over TLS and not, and garbage TLS records (tests/fuzzing_security.py). Longer hunts:
benchmarks/fuzz.py.
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
import sqlite3
import ssl
import struct
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.conftest import NodeFactory
from tests.fuzzing import (
    SERVED,
    FuzzStats,
    HealthCheck,
    drive_real_clients,
    fuzz,
    fuzz_raw,
    fuzz_rpc,
    read_capture,
)
from tests.fuzzing_security import TLS_KINDS, SecureFuzzStats, fuzz_sasl, fuzz_tls
from tests.inprocess import start_inprocess_node
from tests.node_harness import free_port_block
from tests.security.certs import TestPki
from tests.security.client_configs import Login
from tests.security.roundtrip import VALUES, roundtrip
from tests.security.secure_node import SecureNode, security_properties

pytestmark = pytest.mark.e2e

ISSUE_12_FRAME = bytes.fromhex("0000001b0025000212c8bbf1000000fabed9dd48911090cc68a7e89be0e68d")
FRAMES = 20_000
ROUND = 1_000
SEED = 12


def _null_array_frames() -> list[bytes]:
    """Produce v9, DescribeGroups v5 and DeleteTopics v6 with a null top-level array."""

    def frame(api_key: int, version: int, body: bytes) -> bytes:
        header = struct.pack(">hhih", api_key, version, 1, 4) + b"fuzz" + b"\x00"
        return struct.pack(">i", len(header) + len(body)) + header + body

    return [
        frame(0, 9, b"\x00" + struct.pack(">hi", -1, 1000) + b"\x00\x00"),
        frame(15, 5, b"\x00\x00\x00"),
        frame(20, 6, b"\x00" + struct.pack(">i", 1000) + b"\x00"),
    ]


def _closed_after(port: int, frame: bytes) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(frame)
        try:
            return s.recv(1) == b""
        except ConnectionResetError:
            return True


def test_issue_12_frames_leave_the_node_serving(node_factory: NodeFactory) -> None:
    node = node_factory(["--zones", "zone-a"])
    health = HealthCheck(node)
    try:
        for frame in [ISSUE_12_FRAME, *_null_array_frames()]:
            assert _closed_after(node.port, frame)
            assert health.problem() is None
        log = node.log_text()
        assert "cannot decode CreatePartitionsRequest v2" in log
        assert "elements cannot fit in the" in log
        for field in ("topic_data", "groups", "topics"):
            assert f"{field}: count -1 where the schema allows no null" in log
        assert "TypeError" not in log
    finally:
        health.close()


def test_a_client_that_closes_its_side_is_closed_quietly(tmp_path: Path) -> None:
    """A half-close (FIN after a request) ends the connection as Kafka's does, with no
    error in the node's log. In process: on asyncio's own loop, which calls the
    protocol's eof_received (uvloop, the node process's loop, did not complain)."""
    node = start_inprocess_node(tmp_path, ["--zones", "zone-a"])
    try:
        api_versions = struct.pack(">hhih", 18, 0, 7, 4) + b"half"
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
                s.sendall(struct.pack(">i", len(api_versions)) + api_versions)
                assert len(s.recv(65536)) > 4
                s.shutdown(socket.SHUT_WR)
                while s.recv(65536):
                    pass
        log = node.log_text()
        assert "eof_received" not in log and "Fatal error" not in log, log[-2000:]
    finally:
        node.stop()


def test_twenty_thousand_malformed_frames(node_factory: NodeFactory, tmp_path: Path) -> None:
    capture = tmp_path / "frames.bin"
    node = node_factory(["--zones", "zone-a"], env={"ZONEGATE_CAPTURE_FRAMES": str(capture)})
    drive_real_clients(node.bootstrap, "fuzz-capture")
    corpus = read_capture(str(capture))
    captured = {struct.unpack_from(">h", f, 4)[0] for f in corpus}
    # Real clients' produce, fetch, group and admin calls are all in the corpus.
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 14, 16, 18, 19, 32, 37} <= captured, captured
    health = HealthCheck(node)
    rng = random.Random(SEED)
    stats = FuzzStats()
    rss: list[float] = [health.rss_mib()]
    try:
        while stats.frames < FRAMES:
            asyncio.run(fuzz(node.port, ROUND, rng, corpus, stats=stats))
            problem = health.problem()
            assert problem is None, f"after {stats.frames} frames (seed {SEED}): {problem}"
            rss.append(health.rss_mib())
    finally:
        health.close()
    assert stats.frames >= FRAMES
    assert stats.answers > 1000 and stats.closed_by_node > 1000  # both paths were taken
    kinds = set(stats.kinds)
    assert {"flip", "truncate", "size", "count", "header", "splice", "noise"} <= kinds
    # Every API the node serves was sent, well-formed and damaged, many times over.
    assert all(stats.apis.get(k, 0) >= 50 for k, _ in SERVED), stats.apis
    # Memory does not grow with the frames: the last rounds hold what the first did.
    assert max(rss[-5:]) < rss[1] + 64, rss


def test_rpc_and_http_ports_take_garbage(node_factory: NodeFactory) -> None:
    """The leader's gRPC port and the HTTP port: random and garbage calls, bytes that are
    not their protocol, oversized and endless request heads. The node answers or closes,
    logs no ERROR, and serves clients after."""
    http = free_port_block(1)
    node = node_factory(["--zones", "zone-a", "--http-port", str(http)])
    (rpc,) = re.findall(r"leader RPC on port (\d+)", node.log_text())
    health = HealthCheck(node)
    token = _rpc_token(node.data_dir / "meta.db")
    rng = random.Random(SEED)
    try:
        for _ in range(4):
            assert asyncio.run(fuzz_rpc(int(rpc), 150, rng)) == 0  # no token: nothing served
            assert asyncio.run(fuzz_rpc(int(rpc), 150, rng, token)) > 0
            asyncio.run(fuzz_raw(int(rpc), 50, rng))
            asyncio.run(fuzz_raw(http, 100, rng))
            problem = health.problem()
            assert problem is None, problem
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=10) as r:
            assert r.status == 200
    finally:
        health.close()
    log = node.log_text()
    assert "leader RPC calls without the cluster's token" in log  # at WARNING, rate-limited
    assert "refused AppendRequest" in log or "refused ReadIndexRequest" in log


def test_sasl_frames_and_garbage_tls_records(tmp_path: Path) -> None:
    """SaslHandshake and SaslAuthenticate frames (PLAIN, SCRAM and OAUTHBEARER shapes,
    raw v0 tokens, mutations) before authenticating and after a real PLAIN login, on
    SASL_PLAINTEXT and SASL_SSL; garbage TLS records on the SSL and SASL_SSL ports. The
    node stays healthy and a SASL_SSL client still gets in and reads back."""
    pki = TestPki(tmp_path / "pki")
    node = SecureNode(tmp_path / "node", ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT"))
    # Handshakes left unfinished (a truncated ClientHello) are closed by the node after
    # 2 s rather than the default 10 s: fuzz_tls waits up to 5 s for the node's close, so
    # that path is seen taken, not waited out.
    node.write_config(
        {**security_properties(pki, node.ports, None), "zonegate.ssl.handshake.timeout.ms": "2000"}
    )
    node.start()
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    login = ("alice", "alice-secret")
    rng = random.Random(SEED)
    stats = SecureFuzzStats()
    try:
        health = HealthCheck(node)
        try:
            for _ in range(3):
                sasl_plain, sasl_ssl = node.ports["SASL_PLAINTEXT"], node.ports["SASL_SSL"]
                asyncio.run(fuzz_sasl(sasl_plain, 300, rng, stats=stats))
                asyncio.run(fuzz_sasl(sasl_plain, 150, rng, login=login, stats=stats))
                asyncio.run(fuzz_sasl(sasl_ssl, 40, rng, context=context, stats=stats))
                asyncio.run(fuzz_sasl(sasl_ssl, 40, rng, context=context, login=login, stats=stats))
                asyncio.run(fuzz_tls(node.ports["SSL"], 40, rng, context, stats=stats))
                asyncio.run(fuzz_tls(sasl_ssl, 20, rng, context, stats=stats))
                problem = health.problem()
                assert problem is None, f"after {stats.frames} frames (seed {SEED}): {problem}"
        finally:
            health.close()
        assert stats.logins >= 500 and stats.answers > 100 and stats.closed_by_node > 100
        assert set(stats.tls) == set(TLS_KINDS)
        secure = Login(
            node.bootstrap_of("SASL_SSL"), "SASL_SSL", pki.ca_file, mechanism="PLAIN",
            username="alice", password="alice-secret",
        )  # fmt: skip
        assert roundtrip("confluent-kafka", secure, "fuzz-after", "fuzz-after-g") == VALUES
    finally:
        node.stop()


def _rpc_token(meta_db: Path) -> str:
    with sqlite3.connect(meta_db) as db:
        (token,) = db.execute("SELECT value FROM cluster_secrets WHERE name = 'rpc-token'")
    return str(token[0])
