"""The listener's memory bounds: bytes of requests read and not yet answered, and connections.

Kafka's `queued.max.request.bytes` is a memory pool every request is allocated
from as soon as its size is read; a connection whose next request cannot be
allocated is not read until answers free enough (Kafka's SimpleMemoryPool, not
strict: a request is allocated while the pool is not yet full, so one larger
than the whole pool still passes alone). A request so reserved always
completes, so memory held by half-read requests can never wedge the node.
`max.connections` and `max.connections.per.ip` cap the connections: one over
either is closed at once (Kafka holds it in the accept queue for
max.connections; asyncio's listener cannot, so it is refused, and the client
reconnects with its backoff).
"""

from __future__ import annotations

from collections.abc import Callable


class RequestMemory:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity  # bytes; <= 0: no bound (Kafka's -1)
        self.used = 0
        self.most = 0  # the most ever held, for /metrics
        self.refused = 0  # reservations that had to wait
        self._waiting: dict[int, Callable[[], None]] = {}

    def try_reserve(self, nbytes: int) -> bool:
        if self.capacity > 0 and self.used >= self.capacity:
            self.refused += 1
            return False
        self.used += nbytes
        self.most = max(self.most, self.used)
        return True

    def wait(self, key: int, wake: Callable[[], None]) -> None:
        """Calls `wake` (once) when memory is freed."""
        self._waiting[key] = wake

    def forget(self, key: int) -> None:
        self._waiting.pop(key, None)

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        if self._waiting and (self.capacity <= 0 or self.used < self.capacity):
            waiting, self._waiting = self._waiting, {}
            for wake in waiting.values():
                wake()
