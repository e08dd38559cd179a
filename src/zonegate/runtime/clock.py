"""One clock for everything that waits or expires: WAL sealing, leases, sessions, deadlines.

`Clock` has the wall time (milliseconds since the epoch: timestamps and leases,
which other nodes read), the monotonic time (seconds: durations and deadlines
within this process) and a sleep. `SystemClock` is the real one. `ManualClock`
moves only when a test advances it, and wakes the sleepers whose time came, so
tests of time-dependent logic need no sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start; never goes back."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock tests move by hand. `advance` runs the sleepers due, in time order."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic: float = 1000.0) -> None:
        self._wall0 = wall_ms
        self._mono0 = monotonic
        self._now = monotonic
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def wall_ms(self) -> int:
        return self._wall0 + round((self._now - self._mono0) * 1000)

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + max(seconds, 0.0), next(self._order), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        """Moves time forward, waking each sleeper at its time and letting it run."""
        target = self._now + seconds
        # A sleep to a deadline, `sleep(deadline - now)`, can land one rounding step
        # past it; within a nanosecond of the target it is due.
        while self._sleepers and self._sleepers[0][0] <= target + 1e-9:
            when, _, fut = heapq.heappop(self._sleepers)
            self._now = max(self._now, when)
            if not fut.done():
                fut.set_result(None)
            for _ in range(5):  # let the woken task run up to its next wait
                await asyncio.sleep(0)
        self._now = max(self._now, target)
        await asyncio.sleep(0)


async def wait_event(clock: Clock, event: asyncio.Event, timeout_s: float) -> bool:
    """Waits for `event` at most `timeout_s` by `clock`; True if it was set."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    timer = asyncio.ensure_future(clock.sleep(timeout_s))
    try:
        await asyncio.wait([waiter, timer], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        timer.cancel()
    return event.is_set()
