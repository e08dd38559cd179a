"""Node membership by lease: each node renews its row; everyone reads the live set.

A node is live while its lease has not expired. A clean stop expires the lease
at once, so its partitions move without waiting out the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import NodeRecord

log = logging.getLogger(__name__)


def wall_ms() -> int:
    return int(time.time() * 1000)


class Membership:
    def __init__(
        self,
        meta: MetaStore,
        me: NodeRecord,
        *,
        lease_ms: int = 6000,
        interval_s: float = 0.5,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self._meta = meta
        self.me = me
        self.lease_ms = lease_ms
        self._interval = interval_s
        self._clock = clock_ms
        self._nodes: list[NodeRecord] = []
        # The same records by id (node ids are the store's key, so unique); rebuilt
        # with `_nodes`, so it is never older than the list.
        self._by_id: dict[int, NodeRecord] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.renew()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def renew(self) -> None:
        await self._meta.register_node(self.me, self.lease_ms, self._clock())
        nodes = await self._meta.list_nodes()
        self._nodes, self._by_id = nodes, {n.node_id: n for n in nodes}

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.renew()
            except Exception:
                log.exception("node %d could not renew its lease", self.me.node_id)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._meta.expire_node(self.me.node_id)

    def live_nodes(self) -> list[NodeRecord]:
        now = self._clock()
        return [n for n in self._nodes if n.live(now) or n.node_id == self.me.node_id]

    def zone_of(self, node_id: int) -> str:
        """The node's zone if `live_nodes()` lists it now, else "" (asked on every request)."""
        n = self._by_id.get(node_id)
        if n is None or not (n.live(self._clock()) or n.node_id == self.me.node_id):
            return ""
        return n.zone

    def node(self, node_id: int) -> NodeRecord | None:
        return self._by_id.get(node_id)

    def is_live(self, node_id: int) -> bool:
        return any(n.node_id == node_id for n in self.live_nodes())
