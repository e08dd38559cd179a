"""The same contract for every backend, through `open_object_store` (so through the wrapper).

The local backend runs as a unit test; S3 runs against moto's server over HTTP.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.storage.fakes import run
from zonegate.storage.instrumented import InstrumentedObjectStore
from zonegate.storage.local_store import LocalObjectStore
from zonegate.storage.objects import DeletionUnit, ObjectNotFound
from zonegate.storage.store_url import open_object_store

StoreFactory = Callable[[str], InstrumentedObjectStore]  # prefix -> store


@pytest.fixture(
    params=[
        pytest.param("file", marks=pytest.mark.unit),
        pytest.param("s3", marks=pytest.mark.integration),
    ]
)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Factory of stores sharing one location, each under its own prefix."""
    if request.param == "file":
        root = tmp_path / "objects"

        def factory(prefix: str) -> InstrumentedObjectStore:
            return open_object_store((root / prefix).as_uri() if prefix else root.as_uri())

    else:
        endpoint: str = request.getfixturevalue("s3_endpoint")
        bucket: str = request.getfixturevalue("s3_bucket")

        def factory(prefix: str) -> InstrumentedObjectStore:
            return open_object_store(f"s3://{bucket}/{prefix}", endpoint_url=endpoint)

    yield factory


@pytest.fixture
def store(make_store: StoreFactory) -> InstrumentedObjectStore:
    return make_store("")


def test_put_then_get_returns_the_bytes_and_overwrite_replaces(
    store: InstrumentedObjectStore,
) -> None:
    async def body() -> None:
        await store.put("a/b/c", b"hello")
        assert await store.get("a/b/c") == b"hello"
        await store.put("a/b/c", b"bye")
        assert await store.get("a/b/c") == b"bye"
        await store.put("empty", b"")
        assert await store.get("empty") == b""
        await store.close()

    run(body())


def test_a_new_object_is_read_listed_and_deleted_by_what_the_store_answers(
    store: InstrumentedObjectStore,
) -> None:
    """`put_new` may place an object where the store likes (the local store packs it):
    the caller reads it by the key returned, and deletes it as its `deletion_unit`."""

    async def body() -> None:
        data = [bytes([i]) * (i + 1) for i in range(3)]
        keys = [await store.put_new(f"wal/1/{i:012d}-ab", d) for i, d in enumerate(data)]
        assert len(set(keys)) == 3 and all(k.startswith("wal/1/") for k in keys)
        for key, d in zip(keys, data, strict=True):
            assert await store.get(key) == d
            assert await store.get_range(key, 1, 5) == d[1:6]
            unit = store.deletion_unit(key)
            assert unit.key == key or (
                unit.member_keys is not None and unit.member_keys[0] <= key < unit.member_keys[1]
            )
        assert [i.key for i in await store.list("wal/1/")] == sorted(keys)
        assert store.stats().put_requests == 3
        await store.put("streams/1/x", b"s")
        assert store.deletion_unit("streams/1/x") == DeletionUnit("streams/1/x")
        await store.delete_many(sorted({store.deletion_unit(k).key for k in keys}))
        assert await store.list("wal/") == []
        assert await store.get("streams/1/x") == b"s"
        await store.close()

    run(body())


def test_missing_key_raises_object_not_found_naming_it(store: InstrumentedObjectStore) -> None:
    async def body() -> None:
        with pytest.raises(ObjectNotFound) as info:
            await store.get("nope/x")
        assert info.value.key == "nope/x" and "nope/x" in str(info.value)
        with pytest.raises(ObjectNotFound):
            await store.get_range("nope/x", 0, 10)
        # Not-found is not retried: one request each.
        assert store.stats().get_requests == 2
        await store.close()

    run(body())


def test_get_range_returns_the_slice_clipped_at_the_end(store: InstrumentedObjectStore) -> None:
    data = bytes(range(256)) * 4

    async def body() -> None:
        await store.put("obj", data)
        assert await store.get_range("obj", 0, 1) == data[:1]
        assert await store.get_range("obj", 100, 50) == data[100:150]
        assert await store.get_range("obj", 1000, 100) == data[1000:]
        assert await store.get_range("obj", len(data), 10) == b""
        with pytest.raises(ValueError):
            await store.get_range("obj", 0, 0)
        await store.close()

    run(body())


def test_put_if_absent_creates_once_and_never_overwrites(store: InstrumentedObjectStore) -> None:
    async def body() -> None:
        assert await store.put_if_absent("lease", b"first") is True
        assert await store.put_if_absent("lease", b"second") is False
        assert await store.get("lease") == b"first"
        await store.close()

    run(body())


def test_concurrent_put_if_absent_has_exactly_one_winner(store: InstrumentedObjectStore) -> None:
    async def body() -> None:
        results = await asyncio.gather(
            *(store.put_if_absent("race", f"writer-{i}".encode()) for i in range(8))
        )
        assert sorted(results) == [False] * 7 + [True]
        winner = results.index(True)
        assert await store.get("race") == f"writer-{winner}".encode()
        await store.close()

    run(body())


def test_delete_many_removes_keys_and_ignores_missing(store: InstrumentedObjectStore) -> None:
    async def body() -> None:
        for k in ("d/1", "d/2", "d/3"):
            await store.put(k, b"x")
        await store.delete_many(["d/1", "d/3", "d/never-existed"])
        await store.delete_many([])
        assert [i.key for i in await store.list("d/")] == ["d/2"]
        with pytest.raises(ObjectNotFound):
            await store.get("d/1")
        await store.close()

    run(body())


def test_list_is_sorted_filtered_by_prefix_and_has_sizes(store: InstrumentedObjectStore) -> None:
    async def body() -> None:
        keys = ["wal/2/000-b", "wal/1/010-a", "wal/1/002-a", "wal/10/001", "usage/x", "wal/1x"]
        for i, k in enumerate(keys):
            await store.put(k, b"z" * i)
        got = await store.list("wal/1/")
        assert [(i.key, i.size) for i in got] == [("wal/1/002-a", 2), ("wal/1/010-a", 1)]
        # A prefix may end inside a name, as with S3.
        assert [i.key for i in await store.list("wal/1")] == [
            "wal/1/002-a",
            "wal/1/010-a",
            "wal/10/001",
            "wal/1x",
        ]
        assert [i.key for i in await store.list("")] == sorted(keys)
        assert await store.list("missing/") == []
        await store.close()

    run(body())


def test_list_returns_every_key_past_one_page(store: InstrumentedObjectStore) -> None:
    n = 1005  # S3 pages hold 1000 keys

    async def body() -> None:
        sem = asyncio.Semaphore(32)

        async def put(i: int) -> None:
            async with sem:
                await store.put(f"many/{i:05d}", b"")

        await asyncio.gather(*(put(i) for i in range(n)))
        got = await store.list("many/")
        assert [i.key for i in got] == [f"many/{i:05d}" for i in range(n)]
        await store.close()

    run(body(), timeout_s=120)


def test_prefix_of_the_url_isolates_stores_and_is_not_in_keys(make_store: StoreFactory) -> None:
    async def body() -> None:
        a, b = make_store("cluster-a"), make_store("cluster-b")
        await a.put("k", b"from-a")
        await b.put("k", b"from-b")
        assert await a.get("k") == b"from-a"
        assert [i.key for i in await a.list("")] == ["k"]
        await a.delete_many(["k"])
        assert await b.get("k") == b"from-b"
        await a.close()
        await b.close()

    run(body())


def test_stats_count_requests_and_bytes_by_price_class(store: InstrumentedObjectStore) -> None:
    async def body() -> None:
        await store.put("s/1", b"12345")
        await store.put_if_absent("s/2", b"123")
        await store.get("s/1")
        await store.get_range("s/1", 1, 2)
        await store.list("s/")
        await store.delete_many(["s/1", "s/2"])
        stats = store.take_stats()
        assert (stats.put_requests, stats.put_bytes) == (2, 8)
        assert (stats.get_requests, stats.get_bytes) == (2, 7)
        assert stats.other_requests == 2
        assert store.take_stats().put_requests == 0
        await store.close()

    run(body())


@pytest.mark.unit
def test_unknown_scheme_names_the_url_and_the_supported_schemes() -> None:
    with pytest.raises(ValueError, match=r"gs://b/p.*file://.*s3://"):
        open_object_store("gs://b/p")
    with pytest.raises(ValueError, match="absolute"):
        open_object_store("file:relative/dir")


@pytest.mark.unit
def test_local_store_never_shows_partial_writes_and_rejects_escaping_keys(tmp_path: Path) -> None:
    async def body() -> None:
        store = open_object_store(tmp_path.as_uri() + "?fsync=1")
        inner = store.inner
        assert isinstance(inner, LocalObjectStore) and inner._fsync
        await store.put("dir/obj", b"whole")
        # What a crash mid-write leaves behind: a temp file beside the object.
        (tmp_path / "dir" / ".zg-tmp-obj-123").write_bytes(b"who")
        assert [i.key for i in await store.list("")] == ["dir/obj"]
        assert sorted(os.listdir(tmp_path / "dir")) == [".zg-tmp-obj-123", "obj"]
        for bad in ("../outside", "/abs", "a//b", "a/./b", ""):
            with pytest.raises(ValueError):
                await store.put(bad, b"x")
        assert not (tmp_path.parent / "outside").exists()

    run(body())
