"""Long fuzz runs against a real node, for deeper hunts than the suite's bounded run.

Starts `zonegate serve` (one zone, local store; listeners PLAINTEXT, SSL,
SASL_PLAINTEXT and SASL_SSL, tests/security) with frame capture on, drives
kafka-python and confluent-kafka through it so the capture holds real clients'
frames, then sends `--frames` malformed frames (tests/fuzzing.py) in rounds of
`--round` frames. After each round: the node process must be alive, a
confluent-kafka producer and consumer must still produce and read back a
record, and the node's log must hold no ERROR line and no traceback. Prints a
line per round and, last:

    fuzz: N frames survived (seed S), K connections, A answers, C closed by the node,
    L leader RPC calls, F SASL frames (G after a login), T garbage TLS connections;
    RSS R MiB

Each round also sends round/20 leader RPC calls without the cluster's token and
as many with it, and bytes of no protocol to the RPC and HTTP ports; and
(tests/fuzzing_security.py) round/20 connections of SaslHandshake and
SaslAuthenticate frames before authenticating and as many after a real PLAIN login,
on SASL_PLAINTEXT and a tenth of each on SASL_SSL, and round/20 connections of
garbage TLS records on the SSL and SASL_SSL ports.

Exits 1 at the first failed check, naming it and the round's seed, so the run
can be repeated (`--seed`).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sqlite3
import ssl
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzzing import (  # noqa: E402
    FuzzStats,
    HealthCheck,
    drive_real_clients,
    fuzz,
    fuzz_raw,
    fuzz_rpc,
    read_capture,
)
from tests.fuzzing_security import SecureFuzzStats, fuzz_sasl, fuzz_tls  # noqa: E402
from tests.node_harness import free_port_block  # noqa: E402
from tests.security.certs import TestPki  # noqa: E402
from tests.security.secure_node import SecureNode, security_properties  # noqa: E402

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LOGIN = ("alice", "alice-secret")  # a PLAIN user of security_properties


def fuzz_secured(
    node: SecureNode, calls: int, rng: random.Random, context: ssl.SSLContext, s: SecureFuzzStats
) -> None:
    """SASL frames before and after a login, and garbage TLS records, for one round."""
    sasl_plain, sasl_ssl = node.ports["SASL_PLAINTEXT"], node.ports["SASL_SSL"]
    asyncio.run(fuzz_sasl(sasl_plain, calls, rng, stats=s))
    asyncio.run(fuzz_sasl(sasl_plain, calls, rng, login=LOGIN, stats=s))
    asyncio.run(fuzz_sasl(sasl_ssl, calls // 10, rng, context=context, stats=s))
    asyncio.run(fuzz_sasl(sasl_ssl, calls // 10, rng, context=context, login=LOGIN, stats=s))
    asyncio.run(fuzz_tls(node.ports["SSL"], calls * 2 // 5, rng, context, stats=s))
    asyncio.run(fuzz_tls(sasl_ssl, calls * 3 // 5, rng, context, stats=s))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=200_000)
    ap.add_argument("--round", type=int, default=5_000, help="frames between health checks")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="zonegate-fuzz-") as tmp:
        capture = Path(tmp) / "frames.bin"
        http = free_port_block(1)
        pki = TestPki(Path(tmp) / "pki")
        node = SecureNode(
            Path(tmp) / "node",
            LISTENERS,
            args=("--http-port", str(http)),
            env={"ZONEGATE_CAPTURE_FRAMES": str(capture)},
        )
        node.write_config(security_properties(pki, node.ports, None))
        node.start()
        context = ssl.create_default_context(cafile=str(pki.ca_file))
        secured = SecureFuzzStats()
        try:
            drive_real_clients(node.bootstrap, "fuzz-capture")
            corpus = read_capture(str(capture))
            print(f"captured {len(corpus)} frames from real clients", flush=True)
            health = HealthCheck(node)
            (rpc,) = (int(p) for p in re.findall(r"leader RPC on port (\d+)", node.log_text()))
            with sqlite3.connect(Path(tmp) / "node" / "meta.db") as db:
                (token,) = db.execute("SELECT value FROM cluster_secrets").fetchone()
            stats = FuzzStats()
            rng = random.Random(args.seed)
            started = time.monotonic()
            rounds = 0
            rpc_calls = 0
            while stats.frames < args.frames:
                rounds += 1
                asyncio.run(
                    fuzz(
                        node.port,
                        args.round,
                        rng,
                        corpus,
                        concurrency=args.concurrency,
                        stats=stats,
                    )
                )
                # The leader RPC (with and without the cluster's token) and the HTTP port.
                calls = args.round // 20
                asyncio.run(fuzz_rpc(rpc, calls, rng))
                asyncio.run(fuzz_rpc(rpc, calls, rng, token))
                asyncio.run(fuzz_raw(rpc, calls // 4, rng))
                asyncio.run(fuzz_raw(http, calls // 2, rng))
                rpc_calls += 2 * calls
                fuzz_secured(node, calls, rng, context, secured)
                problem = health.problem()
                print(
                    f"round {rounds}: {stats.frames} frames, {stats.connections} connections, "
                    f"{stats.answers} answers, {stats.closed_by_node} closed; "
                    f"{secured.frames} SASL/TLS frames; "
                    f"RSS {health.rss_mib():.0f} MiB; {time.monotonic() - started:.0f} s",
                    flush=True,
                )
                if problem:
                    print(f"FAILED after {stats.frames} frames (seed {args.seed}): {problem}")
                    return 1
            print(
                f"fuzz: {stats.frames} frames survived (seed {args.seed}), {stats.connections} "
                f"connections, {stats.answers} answers, {stats.closed_by_node} closed by the node, "
                f"{rpc_calls} leader RPC calls, {secured.frames - sum(secured.tls.values())} SASL "
                f"frames ({secured.logins} connections after a login), "
                f"{sum(secured.tls.values())} garbage TLS connections; "
                f"RSS {health.rss_mib():.0f} MiB"
            )
            return 0
        finally:
            if node.alive():
                node.stop()


if __name__ == "__main__":
    sys.exit(main())
