"""One worker process of a node (docs/cores.md): the Kafka front, a WAL writer and
the read path on the node's shared listening sockets, reaching the node's roles
(partition leader, group coordinator) in the node process over the leader RPC.

Started by the node process (broker/workers.py), never by hand. It holds no lease,
no data-directory lock and no partition: it reads the metadata store and serves.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import pickle
import signal
import socket
import struct
import sys

from zonegate.broker.http import HttpEndpoint
from zonegate.broker.metrics import node_registry
from zonegate.broker.node import Node
from zonegate.broker.startup import StartupError
from zonegate.broker.workers import WorkerBoot
from zonegate.leader_forwarder.grpc_client import RemoteLeader

log = logging.getLogger(__name__)


async def start_worker(
    node: Node, socks: list[socket.socket], rpc_target: str, orphaned: asyncio.Event
) -> None:
    """Starts `node` (made with `worker` set) as a worker: the stores, the metadata it
    reads, the link to its node process, then the listeners on `socks`. `orphaned` is
    set when the node process is gone (the drain is then short: below)."""
    sup = node.supervisor
    await sup.start("metadata store", None, node.meta.close)
    await sup.start("object store", None, node.store.close)
    await sup.start("QoS scheduler", None, node.qos.close)
    await sup.start("catalog", node.catalog.load)
    await sup.start("client quotas", node.quotas.refresh)
    await sup.start("SCRAM credentials", node.scram.refresh)
    await sup.start("ACLs", node.authorizer.refresh)
    node.peers.token = await node.meta.cluster_secret("rpc-token")
    tls = node.peers.tls
    parent = RemoteLeader(
        rpc_target,
        from_node=node.config.node_id,
        token=node.peers.token,
        credentials=tls.channel_credentials() if tls is not None else None,
        options=tls.channel_options() if tls is not None else (),
        name=f"node {node.config.node_id}'s roles",
    )
    node.parent = parent
    await sup.start("link to the node process", None, parent.close)
    await sup.start("RPC clients", None, node.peers.close)
    await sup.start("usage records", None, node.usage.flush)
    await sup.start("live nodes", lambda: _read_nodes(node))
    for server, sock in zip(node.servers, socks, strict=False):
        await sup.start(f"Kafka listener {server.name}", functools.partial(server.start, sock))
    hb = node.config.heartbeat_s
    sup.every("usage records", node.config.usage_interval_s, node.usage.flush)
    sup.every("catalog refresh", hb / 2, node.refresh_catalog)
    sup.every("client quotas", 2 * hb, node.quotas.refresh)
    sup.every("SCRAM credentials", 2 * hb, node.scram.refresh)
    sup.every("ACLs", hb, node.authorizer.refresh)
    node.http = HttpEndpoint(node_registry(node), node.is_ready, "127.0.0.1", 0)
    await sup.start("HTTP endpoint", node.http.start, node.http.stop)
    await sup.start("draining the Kafka listener", None, lambda: _drain(node, orphaned))
    node.ready = True


async def _read_nodes(node: Node) -> None:
    """Reads the live nodes (never renewing: `leaving` is set) and takes this node's
    record, endpoints and incarnation as the node process registered them: what
    Metadata and FindCoordinator answers name."""
    await node.membership.renew()
    me = node.membership.node(node.config.node_id)
    if me is None:
        raise StartupError(f"node {node.config.node_id} is not registered: no node process")
    node.membership.me = me


async def _drain(node: Node, orphaned: asyncio.Event) -> None:
    """Stops accepting, answers what was read, and seals and uploads the open WAL, its
    batches committed by the node's leader (still serving: it drains after us).

    Without the node process (it died) no produce can be committed by its leader:
    the worker closes its connections at once, so their clients go to the node that
    takes its place, and gives up what it had staged (never acknowledged)."""
    for server in node.servers:
        await server.stop_accepting()
    await node.server.drain(0.0 if orphaned.is_set() else node.config.drain_timeout_s)
    await node.wal.close(drain=not orphaned.is_set())


def _read_exactly(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise EOFError("the node process closed the worker's standard input")
        data += chunk
    return data


def _read_boot() -> WorkerBoot:
    # Unbuffered: nothing past the boot may be read here (the rest is the tie below).
    (size,) = struct.unpack(">Q", _read_exactly(0, 8))
    boot = pickle.loads(_read_exactly(0, size))
    assert isinstance(boot, WorkerBoot)
    return boot


async def _serve(boot: WorkerBoot) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    orphaned = asyncio.Event()
    # Interrupts go to the whole process group: the node process drains us itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def node_process_gone() -> None:
        # Standard input reads empty when the node process closed it, or died.
        if not os.read(0, 4096):
            loop.remove_reader(0)
            orphaned.set()
            stop.set()

    loop.add_reader(0, node_process_gone)
    node = Node(boot.config, worker=boot.index)
    socks = [socket.socket(fileno=fd) for fd in boot.fds]
    try:
        await start_worker(node, socks, boot.rpc_target, orphaned)
    except BaseException:
        log.exception("worker %d of node %d could not start", boot.index, boot.config.node_id)
        await node.stop()
        return 2
    assert node.http is not None
    print(f"worker ready http={node.http.port}", flush=True)
    await stop.wait()
    await node.stop()
    return 0


def main() -> int:
    boot = _read_boot()
    logging.basicConfig(
        level=boot.log_level,
        format=f"%(asctime)s %(levelname)s %(name)s[w{boot.index}]: %(message)s",
        stream=sys.stderr,
    )
    import uvloop

    uvloop.install()
    return asyncio.run(_serve(boot))


if __name__ == "__main__":
    sys.exit(main())
