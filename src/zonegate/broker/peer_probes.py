"""Probes of every other live node's leader RPC, from the lease keeper's thread: which
peers this node has not reached lately, written with its lease (router/reachability.py).

A probe is one cheap leader RPC call (`RemoteLeader.probe`, a read of a stream no
partition has) with a short deadline and no retry, to the address this node
dials for leader RPCs (`--rpc-dial-map` included), so it crosses the same
links as Appends and group calls do. A peer is *unreached* once it has not
answered any probe for `after_ms`; a peer first seen, or seen at a new
address, starts with that much grace, so a node starting never reports the
others unreached. A channel whose probe failed is dropped and the next probe
dials anew: a connection through a link that drops packets would hang every
later call, and a new one shows at once that the link healed.

The probes run on the lease keeper's loop, not the serving loop, so a node
whose serving loop is busy still reaches the others, and only its peers find
it slow (router/reachability.py needs both sides to agree). Their bytes are
counted as leader RPCs against the peer's zone, on the serving loop (the
accounting is that loop's: LeaderPeers.probe_client).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from zonegate.leader_forwarder.grpc_client import RemoteLeader
from zonegate.leader_forwarder.peers import LeaderPeers
from zonegate.metastore.models import NodeRecord
from zonegate.router.membership import Membership


@dataclass
class _Peer:
    target: str
    answered_ms: int  # the last answer, or when first seen at this target (grace)
    client: RemoteLeader | None = None


class PeerProbes:
    def __init__(
        self,
        membership: Membership,
        peers: LeaderPeers,
        serving_loop: asyncio.AbstractEventLoop,
        *,
        after_ms: int,
        clock_ms: Callable[[], int],
    ) -> None:
        self._members = membership
        self._peers_rpc = peers
        self._serving_loop = serving_loop
        self.after_ms = after_ms
        # A probe's deadline: well inside `after_ms`, so two or three fail before a peer
        # counts as unreached; never longer than a second, nor shorter than a quarter
        # (a loaded machine answers late, and short leases would make it a hair trigger).
        self.deadline_s = min(1.0, max(0.25, after_ms / 3000))
        self._clock_ms = clock_ms
        self._peers: dict[int, _Peer] = {}

    async def probe_all(self) -> None:
        """One probe of every other live node, in parallel; forgets the nodes gone."""
        now = self._clock_ms()
        me = self._members.me.node_id
        nodes = [
            n for n in self._members.nodes() if n.node_id != me and n.live(now) and n.rpc_port > 0
        ]
        for node_id in set(self._peers) - {n.node_id for n in nodes}:
            await self._drop(self._peers.pop(node_id))
        await asyncio.gather(*(self._probe(n) for n in nodes))

    async def _probe(self, rec: NodeRecord) -> None:
        target = self._peers_rpc.target(rec)
        peer = self._peers.get(rec.node_id)
        if peer is None or peer.target != target:
            if peer is not None:
                await self._drop(peer)
            peer = self._peers[rec.node_id] = _Peer(target, self._clock_ms())
        if peer.client is None:
            peer.client = self._peers_rpc.probe_client(rec, self.deadline_s, self._serving_loop)
        if await peer.client.probe() is None:
            peer.answered_ms = self._clock_ms()
        else:
            await self._drop(peer)  # the next probe dials anew (module doc)

    def unreached(self) -> tuple[int, ...]:
        """The peers that have answered no probe for `after_ms`, by id."""
        now = self._clock_ms()
        return tuple(
            sorted(n for n, p in self._peers.items() if now - p.answered_ms >= self.after_ms)
        )

    async def _drop(self, peer: _Peer) -> None:
        client, peer.client = peer.client, None
        if client is not None:
            await client.close()

    async def close(self) -> None:
        for peer in self._peers.values():
            await self._drop(peer)
        self._peers.clear()
