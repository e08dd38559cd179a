"""One supervisor for a node's parts and background tasks: ordered start, reverse stop.

Parts start in the order they are added and stop in the reverse order, each
stop run even when an earlier one failed. Background tasks (`every`, `run`)
are owned here: a failure is logged with its traceback and kept, a periodic
task goes on at its next tick, and `problems()` names what failed last and
what died, so /readyz can say the node is not well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from zonegate.runtime.clock import SYSTEM_CLOCK, Clock, wait_event

log = logging.getLogger(__name__)


@dataclass
class _Part:
    name: str
    stop: Callable[[], Awaitable[object]] | None


class Supervisor:
    def __init__(self, name: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self._name = name
        self._clock = clock
        self._parts: list[_Part] = []
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._failing: dict[str, str] = {}

    async def start(
        self,
        name: str,
        start: Callable[[], Awaitable[object]] | None,
        stop: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Starts a part now (after those before it); `stop` runs at shutdown, in reverse."""
        if start is not None:
            await start()
        self._parts.append(_Part(name, stop))

    def every(
        self,
        name: str,
        interval_s: float,
        tick: Callable[[], Awaitable[object]],
        *,
        wake: asyncio.Event | None = None,
        next_in: Callable[[], float | None] | None = None,
    ) -> None:
        """Runs `tick` every `interval_s` until stopped; a failed tick is logged and kept,
        and the next one runs on time. `wake`, when set, runs the next tick at once;
        `next_in` (seconds, or None) may ask for the next tick sooner than the interval."""

        async def loop() -> None:
            while True:
                wait = interval_s
                if next_in is not None and (sooner := next_in()) is not None:
                    wait = min(wait, max(sooner, 0.0))
                if wake is None:
                    await self._clock.sleep(wait)
                else:
                    await wait_event(self._clock, wake, wait)
                    wake.clear()
                try:
                    await tick()
                except Exception as exc:
                    if name in self._failing:
                        # Logged when it began (a store down for a while would otherwise
                        # log a traceback every tick); kept up to date for /readyz.
                        self._failing[name] = f"{type(exc).__name__}: {exc}"
                    else:
                        self._failed(name, exc)
                else:
                    if self._failing.pop(name, None) is not None:
                        log.warning("%s: %s works again", self._name, name)

        self.run(name, loop)

    def run(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        """Runs `body` as a background task until stopped; if it ends by itself (it
        should not), that is logged and kept."""

        async def guarded() -> None:
            try:
                await body()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(name, exc)
                self._failing[name] = f"stopped: {type(exc).__name__}: {exc}"
                return
            self._failing[name] = "stopped by itself"
            log.error("%s: background task %s ended", self._name, name)

        if name in self._tasks:
            raise ValueError(f"background task {name!r} already runs")
        self._tasks[name] = asyncio.get_running_loop().create_task(guarded(), name=name)
        self._parts.append(_Part(name, lambda: self._cancel(name)))

    def _failed(self, name: str, exc: BaseException) -> None:
        log.error("%s: %s failed", self._name, name, exc_info=exc)
        self._failing[name] = f"{type(exc).__name__}: {exc}"

    async def _cancel(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def problems(self) -> dict[str, str]:
        """What failed at its last run, or stopped: name -> what happened."""
        return dict(self._failing)

    async def stop(self) -> None:
        """Stops every part and task in the reverse of their start order."""
        while self._parts:
            part = self._parts.pop()
            if part.stop is None:
                continue
            try:
                await part.stop()
            except Exception:
                log.exception("%s: stopping %s failed", self._name, part.name)
