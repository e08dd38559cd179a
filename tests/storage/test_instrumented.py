"""Retries, timeouts, counters and fault injection of the one object-store wrapper."""

from __future__ import annotations

import asyncio
import random

import pytest

from tests.storage.fakes import MemoryStore, run, spin
from zonegate.runtime.clock import SYSTEM_CLOCK, Clock, ManualClock
from zonegate.storage.instrumented import InstrumentedObjectStore, ObjectStoreStats
from zonegate.storage.objects import (
    ObjectNotFound,
    PermanentObjectStoreError,
    TransientObjectStoreError,
)

pytestmark = pytest.mark.unit


def wrap(
    inner: MemoryStore | None = None,
    *,
    retries: int = 3,
    timeout_s: float = 5.0,
    clock: Clock = SYSTEM_CLOCK,
) -> tuple[InstrumentedObjectStore, list[float]]:
    delays: list[float] = []

    async def record_sleep(s: float) -> None:
        delays.append(s)

    store = InstrumentedObjectStore(
        inner or MemoryStore(),
        retries=retries,
        timeout_s=timeout_s,
        sleep=record_sleep,
        rng=random.Random(7),
        clock=clock,
    )
    return store, delays


def test_transient_faults_within_the_retry_budget_are_absorbed() -> None:
    async def body() -> None:
        store, delays = wrap(retries=3)
        store.inject_fault("put", TransientObjectStoreError("503 SlowDown"), times=3)
        await store.put("k", b"data")
        assert await store.get("k") == b"data"
        # Exponential caps 0.05, 0.1, 0.2 with full jitter.
        assert len(delays) == 3
        assert all(0 <= d <= cap for d, cap in zip(delays, (0.05, 0.1, 0.2), strict=True))
        assert store.stats().put_requests == 1  # faults never reached the store

    run(body())


def test_without_a_sleep_given_the_backoff_waits_on_the_clock() -> None:
    async def body() -> None:
        clock = ManualClock()
        store = InstrumentedObjectStore(MemoryStore(), retries=1, clock=clock)
        store.inject_fault("put", TransientObjectStoreError("503 SlowDown"))
        put = asyncio.ensure_future(store.put("k", b"data"))
        await spin()
        assert not put.done() and store.stats().put_requests == 0  # backing off
        await clock.advance(0.05)  # the first backoff's cap
        await put
        assert store.stats().put_requests == 1

    run(body())


def test_transient_faults_beyond_the_budget_fail_the_call() -> None:
    async def body() -> None:
        store, _ = wrap(retries=2)
        store.inject_fault("get", ConnectionResetError("reset"), times=3)
        await store.put("k", b"v")
        with pytest.raises(ConnectionResetError):
            await store.get("k")
        # The budget was spent on this call only; the next one works.
        assert await store.get("k") == b"v"

    run(body())


def test_permanent_errors_and_not_found_are_not_retried() -> None:
    async def body() -> None:
        store, delays = wrap(retries=5)
        store.inject_fault("list", PermanentObjectStoreError("AccessDenied"), times=2)
        # Each call spends exactly one attempt: no retry ate the second fault.
        for _ in range(2):
            with pytest.raises(PermanentObjectStoreError):
                await store.list("")
        assert await store.list("") == []
        with pytest.raises(ObjectNotFound):
            await store.get("missing")
        assert delays == []
        assert store.stats().get_requests == 1

    run(body())


def test_slow_calls_time_out_and_are_retried() -> None:
    class SlowOnce(MemoryStore):
        calls = 0

        async def get(self, key: str) -> bytes:
            self.calls += 1
            if self.calls == 1:
                await asyncio.Event().wait()  # never answers
            return await super().get(key)

    async def body() -> None:
        inner = SlowOnce()
        clock = ManualClock()
        store, delays = wrap(inner, timeout_s=0.01, clock=clock)
        await store.put("k", b"v")
        got = asyncio.ensure_future(store.get("k"))
        await spin()
        assert inner.calls == 1 and not got.done()
        await clock.advance(0.01)
        assert await got == b"v"
        assert inner.calls == 2 and len(delays) == 1

    run(body())


def test_put_if_absent_whose_answer_was_lost_reports_our_own_write() -> None:
    class LosesFirstAnswer(MemoryStore):
        calls = 0

        async def put_if_absent(self, key: str, data: bytes) -> bool:
            self.calls += 1
            created = await super().put_if_absent(key, data)
            if self.calls == 1:
                raise TransientObjectStoreError("connection reset after write")
            return created

    async def body() -> None:
        store, _ = wrap(LosesFirstAnswer())
        assert await store.put_if_absent("lease", b"mine") is True
        # Someone else's object is still a lost race.
        await store.put("other", b"theirs")
        assert await store.put_if_absent("other", b"mine") is False

    run(body())


def test_take_stats_returns_the_interval_and_resets() -> None:
    async def body() -> None:
        store, _ = wrap()
        await store.put("a", b"123")
        await store.get_range("a", 0, 2)
        await store.delete_many([f"x{i}" for i in range(1500)])  # two DeleteObjects calls
        assert store.take_stats() == ObjectStoreStats(
            put_requests=1, get_requests=1, other_requests=2, put_bytes=3, get_bytes=2
        )
        assert store.take_stats() == ObjectStoreStats()

    run(body())


def test_inject_fault_rejects_unknown_operations() -> None:
    store, _ = wrap()
    with pytest.raises(ValueError, match="unknown operation 'head'"):
        store.inject_fault("head", RuntimeError())


def test_local_filesystem_errors_no_retry_can_fix_are_not_retried() -> None:
    async def body() -> None:
        store, delays = wrap()
        store.inject_fault("put", PermissionError("read-only"), times=2)
        with pytest.raises(PermissionError):
            await store.put("k", b"v")
        assert delays == []

    run(body())
