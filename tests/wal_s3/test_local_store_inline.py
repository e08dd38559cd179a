"""The local store's inline PUT: unnamed spare files linked in on the loop thread."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.wal_s3.fakes import run
from zonegate.wal_s3.local_store import LocalObjectStore

pytestmark = pytest.mark.unit


def _names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_puts_go_through_spare_files_and_leave_nothing_else(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)

    async def body() -> None:
        for i in range(100):  # more than one pool: refills while putting
            await store.put(f"wal/1/{i:04d}", bytes([i]) * (i + 1))
            await asyncio.sleep(0)
        assert store._spares, "the pool was refilled"
        for i in range(100):
            assert await store.get(f"wal/1/{i:04d}") == bytes([i]) * (i + 1)
        await store.close()
        assert store._spares == []

    run(body())
    # No temporary names, no unnamed files left behind (those never had a name).
    assert _names(tmp_path) == [f"wal/1/{i:04d}" for i in range(100)]


def test_an_inline_put_over_an_existing_key_replaces_it(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)

    async def body() -> None:
        await store.put("k", b"first")
        await asyncio.sleep(0.05)  # let the pool fill
        assert store._spares
        await store.put("k", b"second")
        assert await store.get("k") == b"second"
        await store.close()

    run(body())
    assert _names(tmp_path) == ["k"]


def test_a_put_is_inline_when_small_and_threaded_when_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalObjectStore(tmp_path, inline_put_bytes=1000)
    threaded: list[int] = []
    real_to_thread = asyncio.to_thread

    async def to_thread(fn, /, *args):  # type: ignore[no-untyped-def]
        if fn == store._write:
            threaded.append(len(args[1]))
        return await real_to_thread(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)

    async def body() -> None:
        await store.put("warm", b"x")  # the pool is empty at first: threaded
        await asyncio.sleep(0.05)
        await store.put("small", b"s" * 1000)
        await store.put("large", b"l" * 1001)
        assert await store.get("small") == b"s" * 1000
        assert await store.get("large") == b"l" * 1001
        await store.close()

    run(body())
    assert threaded == [1, 1001]


def test_fsync_keeps_every_put_in_the_thread(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path, fsync=True)

    async def body() -> None:
        await store.put("a", b"x")
        await asyncio.sleep(0.01)
        assert store._spares == [] and store._refill is None
        await store.close()

    run(body())
    assert (tmp_path / "a").read_bytes() == b"x"


def test_without_linkat_the_store_falls_back_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalObjectStore(tmp_path)
    real_link = os.link

    def no_proc_link(src: str, dst: str, **kw: object) -> None:
        if src.startswith("/proc/self/fd/"):
            raise FileNotFoundError(2, "no /proc here", src)
        real_link(src, dst, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", no_proc_link)

    async def body() -> None:
        await store.put("a", b"1")
        await asyncio.sleep(0.05)
        await store.put("b", b"2")  # the link fails: written the ordinary way
        await store.put("c", b"3")
        assert [await store.get(k) for k in "abc"] == [b"1", b"2", b"3"]
        assert store._inline_put_bytes == 0
        await store.close()

    run(body())
    assert _names(tmp_path) == ["a", "b", "c"]
