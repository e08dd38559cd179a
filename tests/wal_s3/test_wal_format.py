"""WAL object layout: round trip, corruption detection, footer reads from the tail."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.storage.fakes import MemoryStore, run
from zonegate.storage.instrumented import InstrumentedObjectStore
from zonegate.storage.objects import ObjectNotFound
from zonegate.storage.store_url import open_object_store
from zonegate.wal_s3.wal_format import (
    HEADER_SIZE,
    TAIL_READ_BYTES,
    TRAILER_SIZE,
    CorruptWalObject,
    WalFooterEntry,
    decode_wal_footer,
    encode_wal_object,
    read_footer_from_store,
)

pytestmark = pytest.mark.unit

ENTRIES = [(7, b"batch-one"), (-1, b""), (2**40, b"x" * 300), (7, b"batch-two")]


def test_round_trip_gives_back_every_entry_where_it_was_placed() -> None:
    data, locations = encode_wal_object(3, 1_700_000_000_123, ENTRIES, object_key="wal/3/k")
    footer = decode_wal_footer(data)
    assert (footer.node_id, footer.created_ms, footer.format_version) == (3, 1_700_000_000_123, 1)
    assert footer.object_crc_checked and footer.object_size == len(data)
    assert footer.entries == tuple(
        WalFooterEntry(loc.stream_id, loc.position, loc.length) for loc in locations
    )
    for (stream_id, payload), loc in zip(ENTRIES, locations, strict=True):
        assert loc.object_key == "wal/3/k" and loc.stream_id == stream_id
        assert data[loc.position : loc.position + loc.length] == payload
    # Entries are back to back in the body, starting right after the header.
    assert locations[0].position == HEADER_SIZE
    assert footer.body_end == HEADER_SIZE + sum(len(p) for _, p in ENTRIES)


def test_empty_object_is_valid() -> None:
    data, locations = encode_wal_object(1, 0, [], object_key="k")
    assert locations == [] and decode_wal_footer(data).entries == ()


def test_any_flipped_byte_is_detected() -> None:
    data, _ = encode_wal_object(9, 42, ENTRIES[:2], object_key="k")
    for i in range(len(data)):
        corrupt = bytearray(data)
        corrupt[i] ^= 0x01
        with pytest.raises(CorruptWalObject):
            decode_wal_footer(bytes(corrupt), key="k")


def test_truncation_is_detected_at_every_length() -> None:
    data, _ = encode_wal_object(9, 42, ENTRIES, object_key="k")
    for n in range(len(data)):
        with pytest.raises(CorruptWalObject):
            decode_wal_footer(data[:n])


def test_reasons_name_what_is_wrong() -> None:
    data, _ = encode_wal_object(9, 42, ENTRIES, object_key="k")
    with pytest.raises(CorruptWalObject, match="trailer magic") as info:
        decode_wal_footer(data[:-1] + b"X", key="wal/9/x")
    assert info.value.key == "wal/9/x" and "wal/9/x" in str(info.value)
    with pytest.raises(CorruptWalObject, match="object checksum"):
        decode_wal_footer(data[:30] + b"?" + data[31:])
    # A future version is refused, not guessed at.
    trailer_at = len(data) - TRAILER_SIZE
    v2 = data[: trailer_at + 4] + struct.pack(">H", 2) + data[trailer_at + 6 :]
    with pytest.raises(CorruptWalObject, match="unsupported WAL format version 2"):
        decode_wal_footer(v2)


def _stores(tmp_path: Path) -> InstrumentedObjectStore:
    return open_object_store(tmp_path.as_uri())


def test_footer_read_from_store_costs_one_ranged_get_for_a_small_footer(tmp_path: Path) -> None:
    async def body() -> None:
        store = _stores(tmp_path)
        data, _ = encode_wal_object(5, 77, [(1, b"a" * 100_000), (2, b"b")], object_key="w")
        await store.put("w", data)
        store.take_stats()
        footer = await read_footer_from_store(store, "w", size=len(data))
        stats = store.take_stats()
        assert (stats.get_requests, stats.other_requests) == (1, 0)
        assert stats.get_bytes == TAIL_READ_BYTES  # not the 100 KB body
        assert footer.entries == decode_wal_footer(data).entries
        assert not footer.object_crc_checked
        # Without the size it LISTs first.
        assert (await read_footer_from_store(store, "w")).entries == footer.entries
        assert store.take_stats().other_requests == 1

    run(body())


def test_a_big_footer_takes_a_second_ranged_get(tmp_path: Path) -> None:
    async def body() -> None:
        store = _stores(tmp_path)
        entries = [(i, bytes([i % 256]) * 10) for i in range(1000)]  # 20 KB footer
        data, _ = encode_wal_object(5, 77, entries, object_key="w")
        await store.put("w", data)
        store.take_stats()
        footer = await read_footer_from_store(store, "w", size=len(data))
        assert store.take_stats().get_requests == 2
        assert len(footer.entries) == 1000
        assert footer.entries == decode_wal_footer(data).entries

    run(body())


def test_footer_read_detects_corruption_and_missing_objects() -> None:
    async def body() -> None:
        store = MemoryStore()
        data, _ = encode_wal_object(5, 77, ENTRIES, object_key="w")
        footer_at = len(data) - TRAILER_SIZE - 20  # inside the last footer entry
        await store.put("bad-footer", data[:footer_at] + b"\xff" + data[footer_at + 1 :])
        with pytest.raises(CorruptWalObject, match="footer checksum"):
            await read_footer_from_store(store, "bad-footer")
        await store.put("truncated", data[:-5])
        with pytest.raises(CorruptWalObject):
            await read_footer_from_store(store, "truncated")
        await store.put("short", data)
        with pytest.raises(CorruptWalObject, match="shorter than its listed size"):
            await read_footer_from_store(store, "short", size=len(data) + 10)
        with pytest.raises(ObjectNotFound):
            await read_footer_from_store(store, "absent")

    run(body())
