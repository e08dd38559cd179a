"""Producer ids handed out from blocks taken from the metadata store (Kafka's ProducerIdManager).

The pure core asks for an id synchronously (`next_producer_id`); a block of 1000 is taken
in the background when the current one is 90% used, as Kafka prefetches, so the core
never waits on the store. With no id at hand it raises `ProducerIdsUnavailable`, which
the core answers COORDINATOR_LOAD_IN_PROGRESS (the client retries), and a block is asked
for at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from zonegate.transactions.decisions import ProducerIdsUnavailable

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock size
_PREFETCH_LEFT = 10  # the next block is asked for when 1/10 of this one is left


class ProducerIdBlocks:
    def __init__(
        self, allocate: Callable[[int], Awaitable[int]], block_size: int = BLOCK_SIZE
    ) -> None:
        self._allocate = allocate
        self._size = block_size
        self._next = 0
        self._end = 0  # one past the current block's last id
        self._queued: list[int] = []  # first ids of blocks fetched ahead
        self._fetching: asyncio.Task[None] | None = None

    def next_producer_id(self) -> int:
        """An id never handed out before, cluster-wide; ProducerIdsUnavailable when the
        next block is still on its way."""
        if self._next >= self._end:
            if not self._queued:
                self._prefetch()
                raise ProducerIdsUnavailable("the next block of producer ids is being fetched")
            self._next = self._queued.pop(0)
            self._end = self._next + self._size
        pid = self._next
        self._next += 1
        if not self._queued and (self._end - self._next) * _PREFETCH_LEFT <= self._size:
            self._prefetch()
        return pid

    async def ready(self) -> None:
        """Waits until an id is at hand (the role's start: the first InitProducerId need
        not be refused)."""
        if self._next < self._end or self._queued:
            return
        self._prefetch()
        assert self._fetching is not None
        await asyncio.shield(self._fetching)

    def _prefetch(self) -> None:
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.get_running_loop().create_task(self._fetch())

    async def _fetch(self) -> None:
        try:
            self._queued.append(await self._allocate(self._size))
        except Exception:  # the store is out of reach: asked again at the next need
            log.warning("could not take a block of producer ids", exc_info=True)

    async def close(self) -> None:
        if self._fetching is not None:
            self._fetching.cancel()
            await asyncio.gather(self._fetching, return_exceptions=True)
