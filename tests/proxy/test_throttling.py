"""What the listener counts against request_percentage (the handler's own running time,
not its waits), and the node's request memory pool (queued.max.request.bytes)."""

from __future__ import annotations

import asyncio

import pytest

from zonegate.proxy.memory import RequestMemory
from zonegate.proxy.throttling import BusyTime, timed
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit


def test_busy_time_counts_running_not_waiting() -> None:
    clock = ManualClock()
    computed = [0.0]  # seconds the handler spent computing: time passes as it runs

    def timer() -> float:
        return clock.monotonic() + computed[0]

    async def handler() -> str:
        computed[0] += 0.02
        await clock.sleep(0.2)  # a WAL seal, a long poll: not the node's work
        computed[0] += 0.01
        return "answer"

    async def body() -> None:
        busy = BusyTime(handler(), timer=timer)
        answer = asyncio.ensure_future(timed(busy))
        await asyncio.sleep(0)
        await clock.advance(0.2)
        assert await answer == "answer"
        assert busy.seconds == pytest.approx(0.03)

    asyncio.run(body())


def test_busy_time_passes_cancellation_to_the_handler() -> None:
    cleaned: list[bool] = []

    async def handler() -> None:
        try:
            await asyncio.Event().wait()  # never answers
        finally:
            cleaned.append(True)

    async def wrapper(b: BusyTime) -> None:
        await b

    async def body() -> None:
        task = asyncio.ensure_future(wrapper(BusyTime(handler())))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(body())
    assert cleaned == [True]


def test_request_memory_reserves_until_full_then_wakes_waiters_once() -> None:
    pool = RequestMemory(100)
    assert pool.try_reserve(60) and pool.try_reserve(60)  # not strict, as Kafka's pool
    woken: list[int] = []
    assert not pool.try_reserve(1)
    pool.wait(1, lambda: woken.append(1))
    pool.wait(2, lambda: woken.append(2))
    pool.forget(2)  # its connection closed
    pool.release(10)  # 110 held: still full
    assert woken == []
    pool.release(60)
    assert woken == [1] and pool.used == 50 and pool.most == 120
    pool.release(50)
    assert woken == [1]
    unbounded = RequestMemory(-1)
    assert unbounded.try_reserve(10**12)
