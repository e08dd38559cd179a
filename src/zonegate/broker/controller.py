"""The controller: one node at a time (a lease), moving partitions off dead nodes.

Every `interval_s` each node tries to take or renew the controller lease; the
holder looks for partitions whose leader's lease has expired and moves them to
live nodes, balanced across zones and nodes, bumping each leader epoch in the
same transaction. Moving a partition copies no data: the new leader loads the
index from the metadata store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from zonegate.broker.membership import Membership, wall_ms
from zonegate.broker.placement import place
from zonegate.metastore.api import MetaStore

log = logging.getLogger(__name__)
LEASE = "controller"


class Controller:
    def __init__(self, meta: MetaStore, membership: Membership, *, interval_s: float = 0.5) -> None:
        self._meta = meta
        self._members = membership
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None
        self.is_active = False

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("controller pass failed")
            await asyncio.sleep(self._interval)

    async def run_once(self) -> int:
        """One pass; returns how many partitions moved."""
        me = self._members.me.node_id
        self.is_active = await self._meta.acquire_lease(
            LEASE, me, self._members.lease_ms, wall_ms()
        )
        if not self.is_active:
            return 0
        nodes = await self._meta.list_nodes()
        now = wall_ms()
        live = [n for n in nodes if n.live(now)]
        if not live:
            return 0
        live_ids = {n.node_id for n in live}
        topics = await self._meta.list_topics()
        leaders = [p.leader_node for t in topics for p in t.partitions]
        orphaned = [p for t in topics for p in t.partitions if p.leader_node not in live_ids]
        if not orphaned:
            return 0
        targets = place(len(orphaned), live, (x for x in leaders if x in live_ids))
        moves = [(p.stream_id, node) for p, node in zip(orphaned, targets, strict=True)]
        await self._meta.move_partitions(moves)
        log.info(
            "controller %d moved %d partitions off dead nodes %s",
            me,
            len(moves),
            sorted({p.leader_node for p in orphaned}),
        )
        return len(moves)
