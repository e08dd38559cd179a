"""The injected clock and the supervisor, on a manual clock: no sleeps."""

from __future__ import annotations

import asyncio

import pytest

from zonegate.runtime.clock import ManualClock
from zonegate.runtime.supervisor import Supervisor

pytestmark = pytest.mark.unit


def test_manual_clock_wakes_sleepers_in_time_order() -> None:
    async def run() -> None:
        clock = ManualClock(wall_ms=1000, monotonic=5.0)
        woke: list[tuple[str, float]] = []

        async def sleeper(name: str, s: float) -> None:
            await clock.sleep(s)
            woke.append((name, clock.monotonic()))

        tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("b", 2), ("a", 1), ("c", 3))]
        await asyncio.sleep(0)
        await clock.advance(2.5)
        assert woke == [("a", 6.0), ("b", 7.0)]
        assert clock.monotonic() == 7.5 and clock.wall_ms() == 3500
        await clock.advance(1)
        assert woke[-1] == ("c", 8.0)
        await asyncio.gather(*tasks)

    asyncio.run(run())


def test_a_sleep_to_a_deadline_wakes_when_the_clock_is_advanced_to_it() -> None:
    async def run() -> None:
        clock = ManualClock(monotonic=1000.0)
        deadline = 1000.7
        await clock.advance(0.3)
        # 1000.3 + (deadline - 1000.3) rounds one step past 1000.3 + 0.4.
        sleeper = asyncio.create_task(clock.sleep(deadline - clock.monotonic()))
        await asyncio.sleep(0)
        await clock.advance(0.4)
        assert sleeper.done() and clock.monotonic() >= deadline
        before = clock.monotonic()
        await clock.advance(0)
        assert clock.monotonic() == before  # never back

    asyncio.run(run())


def test_a_manual_timeout_cancels_its_body_when_the_clock_reaches_it() -> None:
    async def run() -> None:
        clock = ManualClock()
        never = asyncio.Event()

        async def waits() -> None:
            async with clock.timeout(2.0):
                await never.wait()

        timed_out = asyncio.create_task(waits())
        await asyncio.sleep(0)
        await clock.advance(1.5)
        assert not timed_out.done()
        await clock.advance(0.5)
        with pytest.raises(TimeoutError):
            await timed_out
        async with clock.timeout(2.0):  # a body done in time is left alone
            await asyncio.sleep(0)
        await clock.advance(5)

    asyncio.run(run())


def test_parts_stop_in_reverse_and_failures_are_kept(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        clock = ManualClock()
        sup = Supervisor("node 1", clock)
        order: list[str] = []

        def part(name: str) -> tuple[object, object]:
            async def start() -> None:
                order.append(f"start {name}")

            async def stop() -> None:
                order.append(f"stop {name}")
                if name == "b":
                    raise RuntimeError("b will not stop")

            return start, stop

        for name in "abc":
            start, stop = part(name)
            await sup.start(name, start, stop)  # type: ignore[arg-type]

        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            ticks += 1
            if ticks == 2:
                raise ValueError("second tick fails")

        sup.every("refresh", 0.5, tick)
        await asyncio.sleep(0)
        await clock.advance(0.5)
        assert ticks == 1 and sup.problems() == {}
        await clock.advance(0.5)
        assert ticks == 2 and sup.problems() == {"refresh": "ValueError: second tick fails"}
        await clock.advance(0.5)
        assert ticks == 3 and sup.problems() == {}  # it went on, and recovered

        async def dies() -> None:
            raise OSError("gone")

        sup.run("worker", dies)
        await asyncio.sleep(0)
        assert sup.problems() == {"worker": "stopped: OSError: gone"}
        await sup.stop()
        assert order == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]
        assert "stopping b failed" in caplog.text

    asyncio.run(run())


def test_a_periodic_task_can_be_woken_and_asked_to_come_sooner() -> None:
    async def run() -> None:
        clock = ManualClock()
        sup = Supervisor("node 1", clock)
        ticks: list[float] = []
        wake = asyncio.Event()
        due: list[float | None] = [None]

        async def tick() -> None:
            ticks.append(clock.monotonic())

        async def settle() -> None:
            for _ in range(20):  # the loop's waits run through a few tasks
                await asyncio.sleep(0)

        sup.every("gc", 10, tick, wake=wake, next_in=lambda: due[0])
        await settle()
        await clock.advance(10)
        await settle()
        assert ticks == [1010.0]
        wake.set()  # woken: a tick at once, not at 1020
        await settle()
        assert ticks == [1010.0, 1010.0]
        due[0] = 3.0  # from now on, the next one is wanted in 3 s
        await clock.advance(10)  # the sleep under way was for the interval
        await settle()
        assert ticks == [1010.0, 1010.0, 1020.0]
        await clock.advance(3)
        await settle()
        assert ticks[3] == 1023.0
        await sup.stop()

    asyncio.run(run())
