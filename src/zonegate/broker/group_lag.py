"""Consumer group lag per partition, for the groups this node coordinates.

Every `interval_s` (a supervised task, node.py): each group whose coordinator
is this node has its committed offsets read from the metadata store, and each
partition's lag is its high watermark (asked of the partition's leader) minus
the committed offset. The metrics endpoint serves the last pass's figures, so
a scrape never waits on the store or a leader; each group is reported by one
node only (its coordinator), so summing over nodes counts it once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from zonegate.metastore.api import GroupStore
from zonegate.metastore.models import PartitionInfo

log = logging.getLogger(__name__)

Lag = dict[tuple[str, str, int], int]  # (group, topic, partition) -> records behind


class GroupLag:
    def __init__(
        self,
        groups: GroupStore,
        is_mine: Callable[[str], bool],
        partition: Callable[[str, int], PartitionInfo | None],
        high_watermark: Callable[[int], Awaitable[int]],
    ) -> None:
        self._groups = groups
        self._is_mine = is_mine
        self._partition = partition
        self._hwm = high_watermark
        self.lag: Lag = {}

    async def measure(self) -> None:
        lag: Lag = {}
        for group in await self._groups.list_groups():
            if not self._is_mine(group.group_id):
                continue
            for o in await self._groups.fetch_offsets(group.group_id):
                p = self._partition(o.topic, o.partition)
                if p is None or o.offset < 0:
                    continue  # a deleted topic's, or "no offset"
                try:
                    hwm = await self._hwm(p.stream_id)
                except Exception as exc:  # its leader moving: next pass
                    log.debug("lag of %s %s-%d: %s", group.group_id, o.topic, o.partition, exc)
                    continue
                lag[(group.group_id, o.topic, o.partition)] = max(hwm - o.offset, 0)
        self.lag = lag
