"""The local store's pack files: WAL objects appended to shared files, each read by its key."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from tests.storage.fakes import MemoryStore, run, spin
from zonegate.runtime.clock import ManualClock
from zonegate.storage import local_store
from zonegate.storage.instrumented import InstrumentedObjectStore
from zonegate.storage.local_store import LocalObjectStore
from zonegate.storage.objects import DeletionUnit, ObjectNotFound, TransientObjectStoreError
from zonegate.storage.pack_files import parse_packed_key
from zonegate.storage.store_url import open_object_store
from zonegate.wal_s3.wal_format import read_footer_from_store
from zonegate.wal_s3.wal_writer import WalWriter

pytestmark = pytest.mark.unit


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _payload(i: int) -> bytes:
    return bytes([i % 251]) * (10 + 7 * i)


def test_packed_objects_share_one_file_and_each_reads_back_by_its_key(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)

    async def body() -> None:
        keys = [await store.put_packed("wal/1/", _payload(i)) for i in range(100)]
        assert len(set(keys)) == 100
        for i, key in enumerate(keys):
            packed = parse_packed_key(key)
            assert packed is not None and packed.pack.startswith("wal/1/")
            assert packed.length == len(_payload(i))
            assert await store.get(key) == _payload(i)
        # Ranges are clipped at the object's end, not the pack file's.
        last = keys[-1]
        size = len(_payload(99))
        assert await store.get_range(last, 3, 5) == _payload(99)[3:8]
        assert await store.get_range(last, size - 2, 100) == _payload(99)[-2:]
        assert await store.get_range(last, size, 10) == b""
        assert await store.get_range(keys[0], 0, 1000) == _payload(0)
        # LIST shows the objects, not the file holding them.
        listed = await store.list("wal/1/")
        assert [(i.key, i.size) for i in listed] == sorted(
            (k, len(_payload(i))) for i, k in enumerate(keys)
        )
        assert [i.key for i in await store.list(keys[5])] == [keys[5]]
        assert await store.list("wal/2/") == []
        await store.close()

    run(body())
    (only,) = _files(tmp_path)
    assert only.startswith("wal/1/") and only.endswith(".pack")


def test_another_store_on_the_same_directory_reads_lists_and_packs_apart(tmp_path: Path) -> None:
    """Each zone's node is a process of its own over one data directory."""
    a, b = LocalObjectStore(tmp_path), LocalObjectStore(tmp_path)

    async def body() -> None:
        ka = [await a.put_packed("wal/1/", _payload(i)) for i in range(5)]
        kb = [await b.put_packed("wal/1/", _payload(i + 50)) for i in range(5)]
        assert {parse_packed_key(k).pack for k in ka}.isdisjoint(  # type: ignore[union-attr]
            {parse_packed_key(k).pack for k in kb}  # type: ignore[union-attr]
        )
        for i, k in enumerate(ka):
            assert await b.get(k) == _payload(i)
        for i, k in enumerate(kb):
            assert await a.get(k) == _payload(i + 50)
        assert {i.key for i in await b.list("wal/")} == set(ka) | set(kb)
        await a.close()
        await b.close()

    run(body())
    assert len(_files(tmp_path)) == 2


def test_packs_roll_at_pack_bytes_and_large_objects_get_a_file_of_their_own(
    tmp_path: Path,
) -> None:
    store = LocalObjectStore(tmp_path, pack_bytes=1000, inline_bytes=300)

    async def body() -> None:
        small = [await store.put_packed("wal/3/", bytes([i]) * 200) for i in range(8)]
        large = await store.put_packed("wal/3/", b"L" * 500)
        more = await store.put_packed("wal/3/", b"m" * 100)  # 4 x 208 + 108 fit
        packs = [parse_packed_key(k).pack for k in small]  # type: ignore[union-attr]
        # 4 records of 208 bytes fit in 1000; the fifth starts a new file.
        assert len(set(packs[:4])) == 1 and len(set(packs[4:])) == 1 and packs[0] != packs[4]
        alone = parse_packed_key(large)
        assert alone is not None and alone.pack not in packs
        assert parse_packed_key(more).pack == packs[4]  # type: ignore[union-attr]
        for i, k in enumerate(small):
            assert await store.get(k) == bytes([i]) * 200
        assert await store.get(large) == b"L" * 500
        assert len(await store.list("wal/3/")) == 10
        await store.close()

    run(body())
    assert len(_files(tmp_path)) == 3


def test_a_pack_file_ages_on_the_clock_the_store_was_opened_with(tmp_path: Path) -> None:
    clock = ManualClock()
    # A grace of 10 s: packs take new objects for at most 5 s.
    store = open_object_store(tmp_path.as_uri(), gc_orphan_grace_ms=10_000, clock=clock)

    async def body() -> None:
        def pack_of(key: str) -> str:
            packed = parse_packed_key(key)
            assert packed is not None
            return packed.pack

        first = [await store.put_new(f"wal/1/{i:06d}-ab", _payload(i)) for i in range(2)]
        await clock.advance(5.0)
        first.append(await store.put_new("wal/1/000002-ab", _payload(2)))  # not past 5 s
        await clock.advance(0.5)
        later = await store.put_new("wal/1/000003-ab", _payload(3))
        packs = {pack_of(k) for k in first}
        assert len(packs) == 1 and pack_of(later) not in packs
        await store.close()

    run(body())


def test_pack_names_and_packed_keys_are_refused_where_they_do_not_belong(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)

    async def body() -> None:
        key = await store.put_packed("wal/1/", b"data")
        pack = parse_packed_key(key).pack  # type: ignore[union-attr]
        for bad in ("wal/x.pack", key, "other/y.pack@8+4"):
            with pytest.raises(ValueError, match="pack"):
                await store.put(bad, b"x")
            with pytest.raises(ValueError, match="pack"):
                await store.put_if_absent(bad, b"x")
        with pytest.raises(ValueError, match=pack):
            await store.delete_many([key])
        assert await store.get(key) == b"data"
        # The pack file goes as a whole, and its objects with it.
        await store.delete_many([pack])
        with pytest.raises(ObjectNotFound):
            await store.get(key)
        assert await store.list("wal/") == []
        await store.close()

    run(body())


def test_a_key_that_does_not_name_a_whole_record_is_not_found(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)

    async def body() -> None:
        await store.put_packed("wal/1/", b"first")
        key = await store.put_packed("wal/1/", b"second object")
        p = parse_packed_key(key)
        assert p is not None
        for wrong in (
            f"{p.pack}@{p.offset + 1}+{p.length - 1}",  # inside the object
            f"{p.pack}@{p.offset}+{p.length + 1}",  # longer than the record
            f"{p.pack}@{p.offset}+{p.length - 1}",  # shorter than the record
            f"wal/1/missing.pack@{p.offset}+{p.length}",
        ):
            with pytest.raises(ObjectNotFound):
                await store.get(wrong)
            with pytest.raises(ObjectNotFound):
                await store.get_range(wrong, 0, 4)
        with pytest.raises(ValueError, match="invalid object key"):
            await store.get(f"../{p.pack}@{p.offset}+{p.length}")
        await store.close()

    run(body())


def test_a_failed_write_gives_its_pack_up_and_hides_nothing_written_before_or_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalObjectStore(tmp_path)
    real_pwritev = os.pwritev

    def header_then_full_disk(fd: int, buffers: list[bytes], offset: int) -> int:
        os.pwrite(fd, buffers[0], offset)  # a record header with no object after it
        raise OSError(errno.ENOSPC, "No space left on device")

    async def body() -> None:
        before = [await store.put_packed("wal/1/", _payload(i)) for i in range(3)]
        monkeypatch.setattr(local_store.os, "pwritev", header_then_full_disk)
        with pytest.raises(OSError, match="No space"):
            await store.put_packed("wal/1/", _payload(3))
        monkeypatch.setattr(local_store.os, "pwritev", real_pwritev)
        after = [await store.put_packed("wal/1/", _payload(i)) for i in range(4, 6)]
        assert parse_packed_key(after[0]).pack != parse_packed_key(before[0]).pack  # type: ignore[union-attr]
        assert [i.key for i in await store.list("wal/1/")] == sorted(before + after)
        for i, k in zip([0, 1, 2, 4, 5], before + after, strict=True):
            assert await store.get(k) == _payload(i)
        await store.close()

    run(body())


def test_with_fsync_the_store_does_not_pack_and_the_wal_writes_files(tmp_path: Path) -> None:
    assert not LocalObjectStore(tmp_path, fsync=True).packs
    store = open_object_store(tmp_path.as_uri() + "?fsync=1")
    assert isinstance(store.inner, LocalObjectStore) and not store.inner.packs

    async def body() -> None:
        with pytest.raises(ValueError, match="fsync"):
            await store.inner.put_packed("wal/1/", b"x")  # type: ignore[attr-defined]
        writer = WalWriter(store, node_id=5, seal_bytes=64, seal_age_s=0.002)
        locs = await asyncio.gather(*(writer.append(1, _payload(i)) for i in range(6)))
        await writer.close()
        assert all(parse_packed_key(loc.object_key) is None for loc in locs)
        await store.close()

    run(body())
    assert not any(f.endswith(".pack") for f in _files(tmp_path))


def test_the_wal_writer_packs_on_the_local_store(tmp_path: Path) -> None:
    store = open_object_store(tmp_path.as_uri())
    assert isinstance(store.inner, LocalObjectStore) and store.inner.packs

    async def body() -> None:
        writer = WalWriter(store, node_id=7, seal_bytes=300, seal_age_s=0.002)
        payloads = [(i % 3, _payload(i)) for i in range(40)]
        locs = await asyncio.gather(*(writer.append(s, p) for s, p in payloads))
        await writer.close()
        objects = {loc.object_key for loc in locs}
        assert len(objects) > 5
        for key in objects:
            assert parse_packed_key(key) is not None
            footer = await read_footer_from_store(store, key)  # size from a LIST of the key
            assert footer.node_id == 7
        for (_, payload), loc in zip(payloads, locs, strict=True):
            assert await store.get_range(loc.object_key, loc.position, loc.length) == payload
        assert store.stats().put_requests == len(objects)
        await store.close()

    run(body())
    (only,) = _files(tmp_path)
    assert only.startswith("wal/7/")


def test_new_objects_are_puts_to_the_wrapper_and_only_local_stores_pack(
    tmp_path: Path,
) -> None:
    store = InstrumentedObjectStore(LocalObjectStore(tmp_path), retries=2, sleep=lambda _: spin(1))
    memory = InstrumentedObjectStore(MemoryStore())

    async def body() -> None:
        store.inject_fault("put", TransientObjectStoreError("slow down"))
        key = await store.put_new("wal/1/000001-ab", b"abc")
        assert parse_packed_key(key) is not None
        assert await store.get(key) == b"abc"
        stats = store.stats()
        assert (stats.put_requests, stats.put_bytes) == (1, 3)  # the faulted try never ran
        store.inject_fault("put", PermissionError("denied"))
        with pytest.raises(PermissionError):
            await store.put_new("wal/1/000002-ab", b"def")
        assert await memory.put_new("wal/1/000001-ab", b"x") == "wal/1/000001-ab"
        await store.close()

    run(body())


def test_new_objects_pack_under_their_directory_and_go_with_their_pack_file(
    tmp_path: Path,
) -> None:
    store = LocalObjectStore(tmp_path)

    async def body() -> None:
        keys = [await store.put_new(f"wal/2/{i:06d}-ab", _payload(i)) for i in range(3)]
        await store.put("streams/1/x", b"s")
        units = {store.deletion_unit(k) for k in keys}
        assert len(units) == 1  # one pack file, deleted as one
        (unit,) = units
        assert unit.key.startswith("wal/2/") and unit.key.endswith(".pack")
        assert unit.member_keys is not None
        assert all(unit.member_keys[0] <= k < unit.member_keys[1] for k in keys)
        # A key of another pack file, or the pack's name with more after it, is outside.
        assert not unit.member_keys[0] <= unit.key + "0.pack@8+1" < unit.member_keys[1]
        assert store.deletion_unit("streams/1/x") == DeletionUnit("streams/1/x")
        with pytest.raises(ValueError, match="invalid object key"):
            await store.put_new("wal/../x", b"y")
        await store.delete_many([unit.key])
        assert [i.key for i in await store.list("")] == ["streams/1/x"]
        await store.close()

    run(body())
    fsynced = LocalObjectStore(tmp_path, fsync=True)
    assert run(fsynced.put_new("wal/3/000001-ab", b"z")) == "wal/3/000001-ab"
    assert (tmp_path / "wal" / "3" / "000001-ab").read_bytes() == b"z"
