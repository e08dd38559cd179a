"""One clock for everything that waits or expires: WAL sealing, leases, sessions, deadlines.

`Clock` has the wall time (milliseconds since the epoch: timestamps and leases,
which other nodes read), the monotonic time (seconds: durations and deadlines
within this process), a sleep and a timeout. `SystemClock` is the real one. `ManualClock`
moves only when a test advances it, and wakes the sleepers whose time came, so
tests of time-dependent logic need no sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start; never goes back."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[object]:
        """`asyncio.timeout` by this clock: the body is cancelled and TimeoutError
        raised once `seconds` have passed."""
        ...


class SystemClock:
    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[object]:
        return asyncio.timeout(seconds)


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

    def _wake_in(self, seconds: float) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + max(seconds, 0.0), next(self._order), fut))
        return fut

    async def sleep(self, seconds: float) -> None:
        await self._wake_in(seconds)

    @contextlib.asynccontextmanager
    async def timeout(self, seconds: float) -> AsyncIterator[None]:
        # asyncio's own timeout does the cancelling and the TimeoutError; this clock
        # only says when, by moving its deadline to now.
        async with asyncio.timeout(None) as cm:
            due = self._wake_in(seconds)
            inside = [True]

            def expire(_: asyncio.Future[None]) -> None:
                if inside[0] and not due.cancelled():
                    cm.reschedule(asyncio.get_running_loop().time())

            due.add_done_callback(expire)
            try:
                yield
            finally:
                inside[0] = False
                due.cancel()

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
