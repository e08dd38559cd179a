"""A 3-zone x 2-node cluster on PostgreSQL and moto's S3 server whose every link goes
through Toxiproxy, so a test can cut, slow or reset any one of them.

The proxies, by name:

- `s3-ZONE`: the nodes of ZONE to the S3 server (their `--s3-endpoint`);
- `pg-ZONE`: the nodes of ZONE to PostgreSQL (their `--metastore`, which the lease
  keeper's own connection uses too);
- `rpc-ZONE-nodeN`: the nodes of ZONE to node N of another zone, leader RPC and group
  forwarding. A node advertises one RPC address to every peer, so each node is told
  with `--rpc-dial-map` which proxy to dial for each node of another zone; nodes of
  one zone dial each other directly (a zone's own network is never cut here);
- `client-nodeN`: Kafka clients to node N: N advertises the proxy's address
  (`--advertised-listeners`), so clients reach it only through the proxy.

Every node has fixed ports, so a stopped node starts again where its peers and
clients knew it.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster_harness import ClusterNode, wait_until
from tests.node_harness import free_port_block
from tests.s3_server import FAKE_AWS_ENV
from tests.toxiproxy_server import Proxy, ToxiproxyServer

ZONES = ("zone-a", "zone-b", "zone-c")
PER_ZONE = 2
PARTITIONS = 6


@dataclass
class FaultNode:
    node: ClusterNode
    client_proxy: Proxy
    rpc_port: int

    @property
    def node_id(self) -> int:
        return self.node.node_id

    @property
    def zone(self) -> str:
        return self.node.zone

    @property
    def bootstrap(self) -> str:
        return self.client_proxy.listen

    def ready(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.node.http_port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.HTTPError):
            return False


@dataclass
class ProxiedCluster:
    root: Path
    toxi: ToxiproxyServer
    metastore_url: str
    s3_endpoint: str
    nodes: list[FaultNode] = field(default_factory=list)
    lease_ms: int = 6000

    def start(self) -> None:
        pg = urllib.parse.urlsplit(self.metastore_url)
        s3 = urllib.parse.urlsplit(self.s3_endpoint)
        meta, store = {}, {}
        for zone in ZONES:
            p = self.toxi.proxy(f"pg-{zone}", f"{pg.hostname}:{pg.port}")
            meta[zone] = pg._replace(netloc=f"{pg.username}@{p.listen}").geturl()
            store[zone] = f"http://{self.toxi.proxy(f's3-{zone}', s3.netloc).listen}"
        plans = []
        for i, zone in enumerate(z for z in ZONES for _ in range(PER_ZONE)):
            node_id, base = i + 1, free_port_block(3)
            client = self.toxi.proxy(f"client-node{node_id}", f"127.0.0.1:{base}")
            plans.append((node_id, zone, base, client))
        dial: dict[str, list[str]] = {zone: [] for zone in ZONES}
        for node_id, zone, base, _ in plans:
            for src in ZONES:
                if src != zone:
                    p = self.toxi.proxy(f"rpc-{src}-node{node_id}", f"127.0.0.1:{base + 1}")
                    dial[src].append(f"127.0.0.1:{base + 1}={p.listen}")
        for node_id, zone, base, client in plans:
            args = [
                "--listen", f"127.0.0.1:{base}",
                "--advertised-listeners", f"PLAINTEXT://{client.listen}",
                "--rpc-listen", f"127.0.0.1:{base + 1}", "--http-port", str(base + 2),
                "--rpc-dial-map", ",".join(dial[zone]),
                "--node-id", str(node_id), "--zone", zone,
                "--data-dir", str(self.root / f"node-{node_id}"),
                "--metastore", meta[zone],
                "--object-store", "s3://zonegate-test/faults", "--s3-endpoint", store[zone],
                "--num-partitions", str(PARTITIONS), "--lease-ms", str(self.lease_ms),
                "--usage-interval-s", "5",
            ]  # fmt: skip
            node = ClusterNode(
                node_id, zone, args, self.root / f"node-{node_id}.log", env=FAKE_AWS_ENV
            )
            self.nodes.append(FaultNode(node, client, base + 1))
        for n in self.nodes:
            n.node.start()
        self.wait_ready()

    def wait_ready(self, timeout: float = 60.0) -> None:
        assert wait_until(lambda: all(n.ready() for n in self.nodes), timeout), [
            n.node_id for n in self.nodes if not n.ready()
        ]
        time.sleep(1.0)  # every node has seen every other's lease

    def heal(self) -> None:
        """Every toxic removed, every proxy enabled, every node running and ready."""
        self.toxi.reset()
        for n in self.nodes:
            if not n.node.alive():
                n.node.start()
        self.wait_ready()

    def in_zone(self, zone: str) -> list[FaultNode]:
        return [n for n in self.nodes if n.zone == zone]

    def bootstrap(self, zone: str) -> str:
        """The zone's nodes first, then the others' (a client that can still reach other
        zones when its own is lost, as the issue's user does)."""
        ordered = self.in_zone(zone) + [n for n in self.nodes if n.zone != zone]
        return ",".join(n.bootstrap for n in ordered)

    def rpc_proxies(self, zone: str) -> Iterator[str]:
        """Every proxy between `zone`'s nodes and other zones' nodes, both ways."""
        for n in self.nodes:
            for src in ZONES:
                if src != n.zone and zone in (src, n.zone):
                    yield f"rpc-{src}-node{n.node_id}"

    def proxies_to(self, zone: str) -> Iterator[str]:
        """Every proxy whose upstream is a node of `zone`: its clients' and its peers'."""
        for n in self.in_zone(zone):
            yield n.client_proxy.name
            for src in ZONES:
                if src != zone:
                    yield f"rpc-{src}-node{n.node_id}"

    def logs(self, tail: int = 2000) -> str:
        return "\n".join(
            f"--- node {n.node_id} ---\n{n.node.log_path.read_text()[-tail:]}" for n in self.nodes
        )

    def stop(self) -> None:
        for n in self.nodes:
            n.node.stop()
