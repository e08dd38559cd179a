"""Group-commit sealing: with no upload in flight an object is sealed at the end of the
loop turn; while one is in flight, appends accumulate into the next object."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.storage.fakes import spin
from zonegate.runtime.clock import ManualClock
from zonegate.storage.store_url import open_object_store
from zonegate.wal_s3.wal_writer import WalWriter

pytestmark = pytest.mark.unit


class _GatedStore:
    """Holds every new object's PUT until the test opens the gate (and writes it with
    `put`, under the key the writer named)."""

    def __init__(self, inner, gate: asyncio.Event) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.gate = gate
        self.puts: list[str] = []

    async def put_new(self, key: str, data: bytes) -> str:
        self.puts.append(key)
        await self.gate.wait()
        await self.inner.put(key, data)
        return key

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def test_seal_when_idle_batches_while_an_upload_is_in_flight(tmp_path: Path) -> None:
    async def run() -> None:
        gate = asyncio.Event()
        clock = ManualClock()
        store = _GatedStore(open_object_store(tmp_path.as_uri()), gate)
        # An age far beyond the test: only idle sealing can seal here.
        w = WalWriter(
            store,
            node_id=1,
            seal_bytes=1 << 30,
            seal_age_s=3600,  # type: ignore[arg-type]
            seal_when_idle=True,
            clock=clock,
        )
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
