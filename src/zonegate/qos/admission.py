"""The node's QoS scheduler in front of its object store: awaits grants from the lanes.

Storage's wrapper (storage/instrumented.py) asks `admit(op, io_class, bytes)`
before every attempt and releases the ticket after it. PUT-like operations
(put, put_if_absent, and LIST and DeleteObjects, which S3 prices and limits
with PUTs) go through the PUT lane, GETs through the GET lane; each lane has
its own budget (qos/scheduler.py). A request the lane cannot grant at once
waits on a future; a pump grants what it can whenever a request finishes or
the buckets have refilled (it sleeps on the injected clock, a few ms at most).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from zonegate.qos.scheduler import DEFAULT_POLICIES, Budget, ClassPolicy, Lane, Waiter
from zonegate.runtime.clock import Clock
from zonegate.runtime.io_class import IO_CLASSES

DIRECTIONS = ("put", "get")
_LANE_OF = {
    "put": "put",
    "put_if_absent": "put",
    "delete_many": "put",
    "list": "put",
    "get": "get",
    "get_range": "get",
}
# The pump never sleeps longer than this while requests wait: a refill "every few ms".
TICK_S = 0.005


@dataclass(frozen=True, slots=True)
class QosSettings:
    put: Budget = field(default_factory=lambda: Budget(max_in_flight=64))
    get: Budget = field(default_factory=lambda: Budget(max_in_flight=64))
    policies: Mapping[str, ClassPolicy] = field(default_factory=lambda: dict(DEFAULT_POLICIES))


class Ticket:
    __slots__ = ("_lane", "_scheduler", "_waiter")

    def __init__(self, scheduler: QosScheduler, lane: Lane, waiter: Waiter) -> None:
        self._scheduler = scheduler
        self._lane = lane
        self._waiter = waiter

    def release(self, moved_bytes: int) -> None:
        self._lane.release(self._waiter, moved_bytes)
        self._scheduler._pump(self._lane)


class QosScheduler:
    def __init__(self, settings: QosSettings, clock: Clock) -> None:
        self.settings = settings
        self._clock = clock
        now = clock.monotonic()
        self.lanes = {
            "put": Lane(settings.put, now, settings.policies),
            "get": Lane(settings.get, now, settings.policies),
        }
        self._futures: dict[Waiter, asyncio.Future[None]] = {}
        self._timers: dict[str, asyncio.Task[None]] = {}

    async def admit(self, op: str, io_class: str, nbytes: int) -> Ticket:
        if io_class not in IO_CLASSES:
            raise ValueError(f"unknown I/O class {io_class!r}")
        lane = self.lanes[_LANE_OF.get(op, "put")]
        w = lane.request(io_class, nbytes, self._clock.monotonic())
        if not w.granted:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._futures[w] = fut
            self._pump(lane)
            try:
                await fut
            except asyncio.CancelledError:
                self._futures.pop(w, None)
                lane.cancel(w)
                self._pump(lane)
                raise
        return Ticket(self, lane, w)

    def queue_depth(self, direction: str, io_class: str) -> int:
        return self.lanes[direction].queue_depth(io_class)

    def _pump(self, lane: Lane) -> None:
        for w in lane.dispatch(self._clock.monotonic()):
            fut = self._futures.pop(w, None)
            # A future already done was cancelled with its task: `admit` releases the grant.
            if fut is not None and not fut.done():
                fut.set_result(None)
        wait = lane.next_ready_in(self._clock.monotonic())
        name = next(d for d, ln in self.lanes.items() if ln is lane)
        if wait is not None and name not in self._timers:
            task = asyncio.get_running_loop().create_task(self._later(lane, name, wait))
            self._timers[name] = task

    async def _later(self, lane: Lane, name: str, wait: float) -> None:
        try:
            await self._clock.sleep(min(max(wait, 0.0), TICK_S))
        finally:
            self._timers.pop(name, None)
        self._pump(lane)

    async def close(self) -> None:
        for task in list(self._timers.values()):
            task.cancel()
        self._timers.clear()
