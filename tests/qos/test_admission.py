"""The scheduler in front of a real (local-directory) object store, on a manual clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.storage.fakes import run
from zonegate.qos.admission import QosScheduler, QosSettings
from zonegate.qos.scheduler import Budget
from zonegate.runtime.clock import ManualClock
from zonegate.runtime.io_class import io_class
from zonegate.storage.store_url import open_object_store

pytestmark = pytest.mark.unit

MB = 1_000_000


def test_every_call_is_granted_under_its_io_class_and_waits_for_its_budget(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        clock = ManualClock()
        qos = QosScheduler(
            QosSettings(put=Budget(bytes_per_s=1 * MB, burst_s=0.1), get=Budget()), clock
        )
        store = open_object_store(tmp_path.as_uri())
        store.admission = qos
        with io_class("produce"):
            await store.put("a", b"x" * 100_000)  # within the 0.1 MB burst: at once
        with io_class("compaction"):
            # Twice the burst: admitted in two parts, as the bucket refills.
            later = asyncio.ensure_future(store.put("b", b"x" * 200_000))
        await asyncio.sleep(0)
        assert not later.done() and qos.queue_depth("put", "compaction") == 1
        await clock.advance(0.09)
        assert not later.done()
        for _ in range(30):  # 0.15 s more: b's two parts are paid
            await clock.advance(0.005)
            await asyncio.sleep(0)
        await asyncio.wait_for(later, 1)
        with io_class("catch_up_fetch"):
            assert await store.get_range("b", 0, 10) == b"x" * 10
        put, get = qos.lanes["put"], qos.lanes["get"]
        assert put.stats("produce").granted_bytes == 100_000
        assert put.stats("compaction").granted_bytes == 200_000
        assert put.stats("compaction").wait.sum >= 0.09
        assert get.stats("catch_up_fetch").granted_requests == 1
        assert put.in_flight == 0 and get.in_flight == 0
        await qos.close()
        await store.close()

    run(body())


def test_a_whole_object_get_is_charged_its_size(tmp_path: Path) -> None:
    async def body() -> None:
        qos = QosScheduler(QosSettings(), ManualClock())
        store = open_object_store(tmp_path.as_uri())
        await store.put("k", b"y" * 5000)
        store.admission = qos
        with io_class("tail_fetch"):
            assert len(await store.get("k")) == 5000
        assert qos.lanes["get"].stats("tail_fetch").granted_bytes == 5000
        # Calls outside any io_class are housekeeping, the lowest class.
        await store.list("")
        assert qos.lanes["put"].stats("housekeeping").granted_requests == 1
        await store.close()

    run(body())


def test_a_cancelled_waiter_gives_its_place_back(tmp_path: Path) -> None:
    async def body() -> None:
        clock = ManualClock()
        qos = QosScheduler(QosSettings(get=Budget(max_in_flight=1)), clock)
        lane = qos.lanes["get"]
        first = await qos.admit("get_range", "tail_fetch", 10)
        waiting = asyncio.ensure_future(qos.admit("get_range", "compaction", 10))
        await asyncio.sleep(0)
        assert lane.waiting == 1
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert lane.waiting == 0
        first.release(10)
        assert lane.in_flight == 0
        again = await qos.admit("get_range", "compaction", 10)
        again.release(10)
        assert lane.stats("compaction").granted_requests == 1

    run(body())
