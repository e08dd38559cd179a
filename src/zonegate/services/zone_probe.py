"""Whether another zone's nodes are still there, asked before a client of that zone is
answered here: a refused connection to a node's leader RPC port means its process is
gone, though its lease still runs.

A client whose zone is lost re-bootstraps to other zones' nodes (its bootstrap list
names them) within a second or two of losing its own; their leases then still run
for seconds, and a node that answered with the lost zone's nodes sent the client
back to them, where librdkafka stayed until its next re-bootstrap (seen: 20 s). So
the node probes the client's zone's nodes first (the controller's probe,
broker/controller.py; the address it dials, from the node's --rpc-dial-map, is
given by the node), at most once a second each, and a zone
whose every node refuses counts as having none (router/view.py). A node that only
times out is not known dead: its lease decides, as for the controller. A result
holds for the incarnation probed and at most a lease.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from zonegate.metastore.models import NodeRecord

_TIMEOUT_S = 0.5
_EVERY_S = 1.0


Address = Callable[[NodeRecord], tuple[str, int]]  # where this node dials its RPC


async def refuses(address: tuple[str, int]) -> bool:
    """Whether a leader RPC port refuses a connection: its process is gone."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(*address), _TIMEOUT_S)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False  # out of reach, not known dead
    writer.close()
    return False


class ZoneProbe:
    def __init__(
        self,
        dial: Address,
        lease_s: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        probe: Callable[[tuple[str, int]], Awaitable[bool]] = refuses,
    ) -> None:
        self._dial = dial
        self._lease_s = lease_s
        self._now = monotonic
        self._probe = probe
        # (node id, incarnation) -> (when probed, refused); and the probes running.
        self._seen: dict[tuple[int, int], tuple[float, bool]] = {}
        self._running: dict[tuple[int, int], asyncio.Future[bool]] = {}

    async def check(self, nodes: Sequence[NodeRecord]) -> None:
        """Probes those of `nodes` not probed in the last second, concurrently."""
        now = self._now()
        for key in [k for k, (at, _) in self._seen.items() if now - at >= self._lease_s]:
            del self._seen[key]  # older than any answer it may still change
        due = []
        for n in nodes:
            key = (n.node_id, n.incarnation)
            seen = self._seen.get(key)
            if seen is None or now - seen[0] >= _EVERY_S:
                due.append(self._one(n, key))
        if due:
            await asyncio.gather(*due)

    async def _one(self, node: NodeRecord, key: tuple[int, int]) -> None:
        running = self._running.get(key)
        if running is not None:  # another request's probe of it: wait for that one
            await asyncio.shield(running)
            return
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            refused = await self._probe(self._dial(node))
            self._seen[key] = (self._now(), refused)
            future.set_result(refused)
        finally:
            del self._running[key]
            if not future.done():
                future.cancel()

    def refused(self, node: NodeRecord) -> bool:
        """Whether this incarnation of the node refused its last probe, within a lease."""
        seen = self._seen.get((node.node_id, node.incarnation))
        return seen is not None and seen[1] and self._now() - seen[0] < self._lease_s
