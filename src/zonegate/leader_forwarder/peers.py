"""This node's leader-RPC clients to the other nodes, one per node, and the usage
accounting of leader RPCs both ways (`forward_rpc` records, docs/usage-records.md).

A client is made when a node is first called and made again when that node came
back at a new address (same id, new RPC port); each counts the bytes of its
calls against the zone of the node it calls.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.metastore.models import NodeRecord
from zonegate.usage.accounting import FORWARD_RPC, Accounting


class Nodes(Protocol):
    """The cluster's nodes as membership sees them (router/membership.py)."""

    def node(self, node_id: int) -> NodeRecord | None: ...

    def zone_of(self, node_id: int) -> str: ...  # a live node's zone, else ""


class LeaderPeers:
    def __init__(self, node_id: int, zone: str, nodes: Nodes, accounting: Accounting) -> None:
        self._me = node_id
        self._zone = zone
        self._nodes = nodes
        self._accounting = accounting
        self._clients: dict[int, RemoteLeader] = {}
        self.token = ""  # the cluster's RPC token: set at start, from the metadata store

    def client(self, node_id: int) -> RemoteLeader | None:
        """The client to `node_id`'s leader RPC, or None while the node is unknown."""
        rec = self._nodes.node(node_id)
        remote = self._clients.get(node_id)
        if remote is not None and rec is not None:
            if remote.target != f"{rec.rpc_host}:{rec.rpc_port}":
                # The node came back (same id, new RPC port): drop the channel to the old one.
                stale = self._clients.pop(node_id)
                asyncio.get_running_loop().create_task(stale.close())
                remote = None
        if remote is None:
            if rec is None:
                return None
            peer_zone = rec.zone

            def count(bytes_out: int, bytes_in: int) -> None:
                self._count(peer_zone, peer_zone, bytes_in, bytes_out)

            remote = RemoteLeader(
                f"{rec.rpc_host}:{rec.rpc_port}",
                from_node=self._me,
                token=self.token,
                bytes_hook=count,
            )
            self._clients[node_id] = remote
        return remote

    def served(self, from_node: int, bytes_in: int, bytes_out: int) -> None:
        """Counts a call this node's leader answered, against the calling node's zone."""
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
        for remote in self._clients.values():
            await remote.close()
