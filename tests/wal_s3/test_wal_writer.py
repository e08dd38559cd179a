"""WalWriter: sealing by size and age, seal-order resolution, failures, close."""

from __future__ import annotations

import asyncio
import functools
import random

import pytest

from tests.storage.fakes import GatedStore, MemoryStore, run, spin
from zonegate.runtime.clock import ManualClock
from zonegate.storage.instrumented import InstrumentedObjectStore
from zonegate.storage.objects import PermanentObjectStoreError, TransientObjectStoreError
from zonegate.wal_s3.wal_format import WalEntryLocation, decode_wal_footer
from zonegate.wal_s3.wal_writer import (
    WalUploadFailed,
    WalWriter,
    WalWriterClosed,
)

pytestmark = pytest.mark.unit

HOUR = 3600.0  # a seal age no test reaches by wall clock


class LateTimers(ManualClock):
    """Time moves but no sleeper wakes: a loop too busy to run the age timer."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()


def instrumented(inner: MemoryStore, retries: int = 3) -> InstrumentedObjectStore:
    async def no_sleep(_: float) -> None:
        return None

    return InstrumentedObjectStore(inner, retries=retries, sleep=no_sleep, rng=random.Random(1))


def test_seals_when_the_open_object_reaches_seal_bytes() -> None:
    async def body() -> None:
        store = MemoryStore()
        writer = WalWriter(store, node_id=4, seal_bytes=100, seal_age_s=HOUR)
        f1 = writer.append(11, b"a" * 60)
        await spin()
        assert not f1.done() and store.objects == {} and writer.open_bytes == 60
        f2 = writer.append(12, b"b" * 50)
        loc1, loc2 = await f1, await f2
        assert loc1.object_key == loc2.object_key and loc1.object_key.startswith("wal/4/")
        data = store.objects[loc1.object_key]
        assert data[loc1.position : loc1.position + loc1.length] == b"a" * 60
        assert data[loc2.position : loc2.position + loc2.length] == b"b" * 50
        footer = decode_wal_footer(data)
        assert [(e.stream_id, e.length) for e in footer.entries] == [(11, 60), (12, 50)]
        assert footer.node_id == 4
        await writer.close()

    run(body())


def test_seals_when_the_first_entry_is_seal_age_old_by_the_injected_clock() -> None:
    async def body() -> None:
        clock = ManualClock()
        store = MemoryStore()
        writer = WalWriter(store, node_id=1, seal_bytes=1 << 20, seal_age_s=5.0, clock=clock)
        f1 = writer.append(1, b"x")
        await clock.advance(4.9)
        f2 = writer.append(1, b"y")
        await spin()
        assert not f1.done() and store.objects == {}
        await clock.advance(0.1)
        assert (await f1).object_key == (await f2).object_key
        # Age counts from the first entry of the new object.
        await clock.advance(3.0)
        f3 = writer.append(2, b"z")
        await clock.advance(4.9)
        f4 = writer.append(2, b"w")
        await spin()
        assert not f3.done() and len(store.objects) == 1
        await clock.advance(0.1)
        assert (await f3).object_key == (await f4).object_key != (await f1).object_key
        assert len(store.objects) == 2
        await writer.close()

    run(body())


def test_an_append_that_finds_its_object_overdue_seals_it_on_the_spot() -> None:
    async def body() -> None:
        clock = LateTimers()
        store = MemoryStore()
        writer = WalWriter(store, node_id=1, seal_bytes=1 << 20, seal_age_s=5.0, clock=clock)
        f1 = writer.append(1, b"x")
        await spin()  # the age timer starts its sleep, and oversleeps
        await clock.advance(5.0)
        await spin()
        assert not f1.done()
        f2 = writer.append(1, b"y")
        assert (await f1).object_key == (await f2).object_key
        assert len(store.objects) == 1
        await writer.close()

    run(body())


def test_the_age_timer_seals_without_any_call() -> None:
    async def body() -> None:
        clock = ManualClock()
        store = MemoryStore()
        writer = WalWriter(store, node_id=1, seal_bytes=1 << 20, seal_age_s=0.005, clock=clock)
        fut = writer.append(3, b"data")
        await clock.advance(0.005)
        loc = await fut
        assert loc.object_key in store.objects
        await writer.close()

    run(body())


def test_objects_carry_the_clock_s_wall_time() -> None:
    async def body() -> None:
        clock = ManualClock(wall_ms=1_650_000_000_000)
        store = MemoryStore()
        writer = WalWriter(store, node_id=1, seal_bytes=1, seal_age_s=HOUR, clock=clock)
        await clock.advance(2.5)
        loc = await writer.append(1, b"x")
        assert decode_wal_footer(store.objects[loc.object_key]).created_ms == 1_650_000_002_500
        await writer.close()

    run(body())


def _record(into: list[int], i: int, _: object) -> None:
    into.append(i)


def test_futures_resolve_in_seal_order_even_when_a_later_put_finishes_first() -> None:
    async def body() -> None:
        gated = GatedStore(MemoryStore(), held=[0])
        writer = WalWriter(gated, node_id=1, seal_bytes=10, seal_age_s=HOUR)
        resolved: list[int] = []
        futures = []
        for i in range(3):
            f = writer.append(i, b"0123456789")  # each append seals one object
            f.add_done_callback(functools.partial(_record, resolved, i))
            futures.append(f)
        await spin()
        # Objects 1 and 2 are durable, object 0 is still uploading...
        assert len(gated.finished) == 2 and gated.started[0] not in gated.finished
        # ...and nobody has been told about 1 or 2.
        assert resolved == [] and not any(f.done() for f in futures)
        gated.release(0)
        locs = await asyncio.gather(*futures)
        assert resolved == [0, 1, 2]
        assert [loc.object_key for loc in locs] == gated.started
        await writer.close()

    run(body())


def test_a_failed_put_fails_its_futures_in_seal_order_and_later_objects_succeed() -> None:
    async def body() -> None:
        store = instrumented(MemoryStore())
        gated = GatedStore(store, held=[0])  # object 0 waits in front of the store
        writer = WalWriter(gated, node_id=1, seal_bytes=4, seal_age_s=HOUR)
        store.inject_fault("put", PermanentObjectStoreError("AccessDenied"))  # hits object 1
        f0 = writer.append(1, b"aaaa")
        f1 = writer.append(1, b"bbbb")
        await spin()
        # Object 1 has already failed, but its failure waits behind object 0.
        assert not f0.done() and not f1.done()
        gated.release(0)
        assert (await f0).object_key == gated.started[0]
        with pytest.raises(WalUploadFailed) as info:
            await f1
        assert info.value.key == gated.started[1] and gated.started[1] in str(info.value)
        assert isinstance(info.value.__cause__, PermanentObjectStoreError)
        f2 = writer.append(1, b"cccc")
        assert (await f2).object_key in gated.finished
        await writer.close()

    run(body())


def test_transient_put_failures_are_retried_by_the_store_and_the_append_succeeds() -> None:
    async def body() -> None:
        inner = MemoryStore()
        store = instrumented(inner, retries=3)
        store.inject_fault("put", TransientObjectStoreError("503"), times=3)
        writer = WalWriter(store, node_id=1, seal_bytes=1, seal_age_s=HOUR)
        loc = await writer.append(9, b"payload")
        assert loc.object_key in inner.objects
        assert store.stats().put_requests == 1
        await writer.close()

    run(body())


def test_on_uploaded_gets_each_object_exactly_as_stored() -> None:
    async def body() -> None:
        store = MemoryStore()
        seen: dict[str, bytes] = {}
        writer = WalWriter(
            store, node_id=1, seal_bytes=3, seal_age_s=HOUR, on_uploaded=seen.__setitem__
        )
        await asyncio.gather(writer.append(1, b"abc"), writer.append(2, b"def"))
        assert seen == store.objects and len(seen) == 2
        await writer.close()

    run(body())


def test_a_failing_on_uploaded_hook_does_not_fail_the_append() -> None:
    def broken(key: str, data: bytes) -> None:
        raise RuntimeError("cache full")

    async def body() -> None:
        writer = WalWriter(
            MemoryStore(), node_id=1, seal_bytes=1, seal_age_s=HOUR, on_uploaded=broken
        )
        assert isinstance(await writer.append(1, b"a"), WalEntryLocation)
        await writer.close()

    run(body())


def test_keys_never_repeat_across_writers_of_the_same_node() -> None:
    async def body() -> None:
        store = MemoryStore()
        keys: list[str] = []
        for _ in range(2):  # a restart: same node id, sequence from zero again
            writer = WalWriter(store, node_id=7, seal_bytes=1, seal_age_s=HOUR)
            locs = await asyncio.gather(*(writer.append(1, b"x") for _ in range(5)))
            keys += [loc.object_key for loc in locs]
            await writer.close()
        assert len(set(keys)) == 10 and len(store.objects) == 10
        first_run = keys[:5]
        assert first_run == sorted(first_run)  # sequence increases within a run

    run(body())


def test_at_most_max_inflight_uploads_run_at_once() -> None:
    async def body() -> None:
        gated = GatedStore(MemoryStore(), held=range(6))
        writer = WalWriter(gated, node_id=1, seal_bytes=1, seal_age_s=HOUR, max_inflight_uploads=2)
        futures = [writer.append(1, b"x") for _ in range(6)]
        await spin()
        assert gated.running == 2 and len(gated.started) == 2
        for n in range(6):
            gated.release(n)
        await asyncio.gather(*futures)
        assert gated.max_running == 2 and len(gated.finished) == 6
        await writer.close()

    run(body())


def test_close_drains_the_open_object_then_refuses_appends() -> None:
    async def body() -> None:
        store = MemoryStore()
        writer = WalWriter(store, node_id=1, seal_bytes=1 << 20, seal_age_s=HOUR)
        f = writer.append(1, b"last words")
        await writer.close()
        assert f.done() and f.result().object_key in store.objects
        with pytest.raises(WalWriterClosed):
            writer.append(1, b"too late")

    run(body())


def test_close_without_drain_fails_what_is_not_durable() -> None:
    async def body() -> None:
        gated = GatedStore(MemoryStore(), held=[0])
        writer = WalWriter(gated, node_id=1, seal_bytes=10, seal_age_s=HOUR)
        uploading = writer.append(1, b"x" * 10)
        staged = writer.append(1, b"y")
        await spin()
        await writer.close(drain=False)
        with pytest.raises(WalUploadFailed):
            uploading.result()
        with pytest.raises(WalWriterClosed):
            staged.result()
        assert gated.finished == []

    run(body())


def test_append_outside_a_running_loop_is_refused() -> None:
    writer = WalWriter(MemoryStore(), node_id=1, seal_bytes=10, seal_age_s=HOUR)
    with pytest.raises(RuntimeError):
        writer.append(1, b"x")
