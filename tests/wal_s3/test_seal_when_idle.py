"""Group-commit sealing: with no upload in flight an object is sealed at the end of the
loop turn; while one is in flight, appends accumulate into the next object."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from tests.storage.fakes import spin
from zonegate.runtime.clock import ManualClock
from zonegate.storage.store_url import open_object_store
from zonegate.wal_s3.wal_writer import PutPace, WalWriter

pytestmark = pytest.mark.unit


class _Wrapped:
    """A store whose new objects' PUTs a test holds (`put_new`); the rest as the store."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.puts: list[str] = []

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


class _GatedStore(_Wrapped):
    """Holds every new object's PUT until the test opens the gate (and writes it with
    `put`, under the key the writer named)."""

    def __init__(self, inner, gate: asyncio.Event) -> None:  # type: ignore[no-untyped-def]
        super().__init__(inner)
        self.gate = gate

    async def put_new(self, key: str, data: bytes) -> str:
        self.puts.append(key)
        await self.gate.wait()
        await self.inner.put(key, data)
        return key


def _idle_sealing(store: _Wrapped, clock: ManualClock) -> WalWriter:
    """A writer that seals when idle (or at the pace), with an age far beyond the test."""
    return WalWriter(
        store,  # type: ignore[arg-type]
        node_id=1,
        seal_bytes=1 << 30,
        seal_age_s=3600,
        seal_when_idle=True,
        clock=clock,
    )


def test_seal_when_idle_batches_while_an_upload_is_in_flight(tmp_path: Path) -> None:
    async def run() -> None:
        gate = asyncio.Event()
        clock = ManualClock()
        store = _GatedStore(open_object_store(tmp_path.as_uri()), gate)
        w = _idle_sealing(store, clock)  # only idle sealing can seal here
        first = [w.append(1, b"a"), w.append(2, b"b")]  # one loop turn: one object
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(store.puts) == 1
        later = [w.append(1, b"c") for _ in range(5)]  # upload in flight: accumulate
        await clock.advance(10)
        await spin()
        assert len(store.puts) == 1
        gate.set()
        locs = await asyncio.gather(*first, *later)
        assert len(store.puts) == 2
        assert {loc.object_key for loc in locs[:2]} == {store.puts[0]}
        assert {loc.object_key for loc in locs[2:]} == {store.puts[1]}
        await w.close()

    asyncio.run(run())


def test_without_idle_sealing_the_age_decides(tmp_path: Path) -> None:
    async def run() -> None:
        clock = ManualClock()
        store = open_object_store(tmp_path.as_uri())
        w = WalWriter(store, node_id=1, seal_bytes=1 << 30, seal_age_s=3600, clock=clock)
        fut = w.append(1, b"a")
        await clock.advance(3599)
        await spin()
        assert not fut.done()
        await clock.advance(1)
        await fut
        await w.close()
        assert fut.done()

    asyncio.run(run())


class _HeldStore(_Wrapped):
    """Holds each PUT until the test releases it by its index."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        super().__init__(inner)
        self.release: list[asyncio.Event] = []

    async def put_new(self, key: str, data: bytes) -> str:
        gate = asyncio.Event()
        self.puts.append(key)
        self.release.append(gate)
        await gate.wait()
        await self.inner.put(key, data)
        return key


def test_a_put_past_twice_its_usual_time_lets_waiting_data_go_beside_it(
    tmp_path: Path,
) -> None:
    """A slow link (every PUT late by the same delay) must add its delay to a produce
    once, not twice: data waiting behind a PUT that has run twice the usual PUT time is
    sealed into a PUT of its own, and PUTs start no more often than that."""

    async def run() -> None:
        clock = ManualClock()
        store = _HeldStore(open_object_store(tmp_path.as_uri()))
        w = _idle_sealing(store, clock)
        first = w.append(1, b"a")
        await spin()
        await clock.advance(0.04)  # a usual PUT: 40 ms
        store.release[0].set()
        await first
        assert w.put_pace.interval_s == pytest.approx(0.08)

        second = w.append(1, b"b")  # the link slows: this PUT hangs
        await spin()
        assert len(store.puts) == 2
        waiting = [w.append(1, b"c"), w.append(2, b"d")]
        await clock.advance(0.07)
        await spin()
        assert len(store.puts) == 2  # within the pace: it waits for the PUT in flight
        await clock.advance(0.011)
        await spin()
        assert len(store.puts) == 3  # past it: sealed beside the slow PUT
        later = w.append(1, b"e")
        await clock.advance(0.079)
        await spin()
        assert len(store.puts) == 3  # the next one only a pace after the last start
        await clock.advance(0.002)
        await spin()
        assert len(store.puts) == 4

        store.release[2].set()  # later objects done first: answers still in seal order
        store.release[3].set()
        await spin()
        assert not second.done() and not any(f.done() for f in waiting) and not later.done()
        store.release[1].set()
        locs = await asyncio.gather(second, *waiting, later)
        assert [loc.object_key for loc in locs] == [store.puts[1]] + [store.puts[2]] * 2 + [
            store.puts[3]
        ]
        await w.close()

    asyncio.run(run())


def test_the_pace_is_the_usual_put_time_followed_slowly() -> None:
    pace = PutPace(down_s=10, up_s=60)
    assert pace.interval_s is None
    pace.observe(0.3, now=0.0)  # a node's first PUTs are slow
    for i in range(300):  # then 40 ms: followed within seconds (30 s)
        pace.observe(0.04, now=0.1 * (i + 1))
    assert pace.usual_s == pytest.approx(0.04)
    assert pace.interval_s == pytest.approx(0.08)
    for i in range(50):  # 100 ms added to the link for 5 s: barely moves
        pace.observe(0.14, now=30.1 + 0.1 * i)
    assert pace.usual_s == pytest.approx(0.04 * math.exp(5.0 / 60), rel=0.01)
    for i in range(1200):  # the link stays slow for two minutes: it becomes the usual
        pace.observe(0.14, now=35.1 + 0.1 * i)
    assert pace.usual_s == pytest.approx(0.14)
    pace.observe(0.04, now=155.2)  # healed: it follows back faster than it rose
    assert pace.usual_s == pytest.approx(0.14 / math.exp(0.2 / 10))
