"""This node's leader-RPC clients to the other nodes, one per node, and the usage
accounting of leader RPCs both ways (`forward_rpc` records, docs/usage-records.md).

A client is made when a node is first called and made again when that node came
back at a new address (same id, new RPC port), or when this node's certificates
were re-read (mutual TLS, rpc_tls.py: new connections present the new ones); each
counts the bytes of its calls against the zone of the node it calls. A node is
dialled at the address it advertises, or at the one `--rpc-dial-map` gives for it
(a proxy or NAT between zones).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Protocol

from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.rpc_tls import RpcTls
from zonegate.metastore.models import NodeRecord
from zonegate.usage.accounting import FORWARD_RPC, Accounting


class Nodes(Protocol):
    """The cluster's nodes as membership sees them (router/membership.py)."""

    def node(self, node_id: int) -> NodeRecord | None: ...

    def zone_of(self, node_id: int) -> str: ...  # a live node's zone, else ""


def dial_address(rec: NodeRecord, dial: Mapping[str, str]) -> tuple[str, int]:
    """Where this node reaches `rec`'s leader RPC: its advertised address, or the one
    the dial map gives for it."""
    advertised = f"{rec.rpc_host}:{rec.rpc_port}"
    host, _, port = dial.get(advertised, advertised).rpartition(":")
    return host, int(port)


class LeaderPeers:
    def __init__(
        self,
        node_id: int,
        zone: str,
        nodes: Nodes,
        accounting: Accounting,
        dial: Mapping[str, str] | None = None,
    ) -> None:
        self._me = node_id
        self.dial: Mapping[str, str] = dial or {}
        self._zone = zone
        self._nodes = nodes
        self._accounting = accounting
        self._clients: dict[int, RemoteLeader] = {}
        self.token = ""  # the cluster's RPC token: set at start, from the metadata store
        self.tls: RpcTls | None = None  # mutual TLS between nodes, when configured
        # A replaced channel is closed this long after, so calls on it may finish.
        self.close_replaced_after_s = 30.0
        self._retired: dict[RemoteLeader, asyncio.TimerHandle] = {}

    def client(self, node_id: int) -> RemoteLeader | None:
        """The client to `node_id`'s leader RPC, or None while the node is unknown."""
        rec = self._nodes.node(node_id)
        remote = self._clients.get(node_id)
        generation = self.tls.channel_generation() if self.tls is not None else 0
        if remote is not None and rec is not None:
            if remote.target != self._target(rec):
                # The node came back (same id, new RPC port): drop the channel to the old one.
                stale = self._clients.pop(node_id)
                asyncio.get_running_loop().create_task(stale.close())
                remote = None
            elif remote.tls_generation != generation:
                # Certificates rotated: new calls go over a new channel, presenting the
                # new ones; those in flight on the old finish first.
                self._retire(self._clients.pop(node_id))
                remote = None
        if remote is None:
            if rec is None:
                return None
            remote = self.make_client(rec, generation)
            self._clients[node_id] = remote
        return remote

    def make_client(self, rec: NodeRecord, generation: int = 0) -> RemoteLeader:
        """A client to the node `rec` names, counting its calls against the node's zone."""
        peer_zone = rec.zone

        def count(bytes_out: int, bytes_in: int) -> None:
            self._count(peer_zone, peer_zone, bytes_in, bytes_out)

        tls = self.tls
        return RemoteLeader(
            self._target(rec),
            from_node=self._me,
            token=self.token,
            bytes_hook=count,
            credentials=tls.channel_credentials() if tls is not None else None,
            options=tls.channel_options() if tls is not None else (),
            name=f"node {rec.node_id}",
            tls_generation=generation,
        )

    def probe_client(
        self, rec: NodeRecord, deadline_s: float, loop: asyncio.AbstractEventLoop
    ) -> RemoteLeader:
        """A client to `rec` for reachability probes, made on another thread's loop
        (broker/peer_probes.py): one attempt, a short deadline, its bytes counted
        against the node's zone on `loop`, whose accounting this is."""
        zone = rec.zone

        def count(bytes_out: int, bytes_in: int) -> None:
            loop.call_soon_threadsafe(self._count, zone, zone, bytes_in, bytes_out)

        tls = self.tls
        return RemoteLeader(
            self._target(rec),
            from_node=self._me,
            token=self.token,
            deadline_s=deadline_s,
            attempts=1,
            bytes_hook=count,
            credentials=tls.channel_credentials() if tls is not None else None,
            options=tls.channel_options() if tls is not None else (),
            name=f"node {rec.node_id}",
        )

    def target(self, rec: NodeRecord) -> str:
        """Where this node dials `rec`'s leader RPC."""
        return self._target(rec)

    def _target(self, rec: NodeRecord) -> str:
        host, port = dial_address(rec, self.dial)
        return f"{host}:{port}"

    def _retire(self, remote: RemoteLeader) -> None:
        loop = asyncio.get_running_loop()

        def close() -> None:
            self._retired.pop(remote, None)
            loop.create_task(remote.close())

        self._retired[remote] = loop.call_later(self.close_replaced_after_s, close)

    async def refusals(self, nodes: Sequence[NodeRecord]) -> tuple[int, list[str]]:
        """Calls each node once: how many answered, and a line for each that refused
        this node's TLS (or whose certificate was refused here). Nodes out of reach
        count in neither."""
        clients = [self.make_client(rec) for rec in nodes]
        try:
            outcomes = await asyncio.gather(*(c.probe() for c in clients))
        finally:
            for c in clients:
                await c.close()
        answered = sum(1 for o in outcomes if o is None)
        refused = [
            f"node {rec.node_id} at {rec.rpc_host}:{rec.rpc_port}: {o.removeprefix('TLS: ')}"
            for rec, o in zip(nodes, outcomes, strict=True)
            if o is not None and o.startswith("TLS: ")
        ]
        return answered, refused

    def served(self, from_node: int, bytes_in: int, bytes_out: int) -> None:
        """Counts a call this node's leader answered, against the calling node's zone.
        A call from this node's own worker (docs/cores.md) moved nothing between nodes
        and is not counted."""
        if from_node == self._me:
            return
        zone = self._nodes.zone_of(from_node) if from_node >= 0 else ""
        self._count(zone, self._zone, bytes_in, bytes_out)

    def _count(self, peer_zone: str, leader_zone: str, bytes_in: int, bytes_out: int) -> None:
        """One leader RPC between this node and a peer, in the usage accounting."""
        self._accounting.add(
            FORWARD_RPC,
            peer_zone=peer_zone,
            leader_zone=leader_zone,
            bytes_in=bytes_in,
            bytes_out=bytes_out,
            requests=1,
        )

    async def close(self) -> None:
        for remote, timer in list(self._retired.items()):
            timer.cancel()
            await remote.close()
        self._retired.clear()
        for remote in self._clients.values():
            await remote.close()
