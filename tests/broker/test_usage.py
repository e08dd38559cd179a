"""Usage records are written as documented (docs/usage-records.md) to a real local store."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from zonegate.broker.usage import USAGE_SCHEMA, UsageWriter
from zonegate.storage.store_url import open_object_store
from zonegate.usage.accounting import FORWARD_RPC, PRODUCE_DATA, Accounting
from zonegate.usage.schema import SCHEMA_VERSION

pytestmark = pytest.mark.unit


def test_usage_records_round_trip(tmp_path: Path) -> None:
    async def run() -> None:
        store = open_object_store((tmp_path / "objects").as_uri())
        acc = Accounting(7, "zone-a")
        writer = UsageWriter(store, acc, cluster="c1", stored_bytes=lambda: 123)
        acc.add(
            PRODUCE_DATA,
            client_zone="zone-a",
            peer_zone="zone-a",
            leader_zone="zone-b",
            topic="t",
            client_id="cid",
            bytes_in=1000,
            bytes_out=50,
            requests=2,
        )
        acc.add(
            FORWARD_RPC,
            peer_zone="zone-b",
            leader_zone="zone-b",
            bytes_in=10,
            bytes_out=40,
            requests=1,
        )
        await store.put("wal/x", b"x" * 100)
        key = await writer.flush()
        assert key is not None and key.startswith("usage/date=") and "/node=7/" in key
        table = pq.read_table(io.BytesIO(await store.get(key)))
        assert table.schema.equals(USAGE_SCHEMA)
        rows = {r["kind"]: r for r in table.to_pylist()}
        assert set(rows) == {"produce_data", "forward_rpc", "s3", "storage"}
        p = rows["produce_data"]
        assert (p["bytes_in"], p["bytes_out"], p["requests"], p["topic"]) == (1000, 50, 2, "t")
        assert p["schema_version"] == SCHEMA_VERSION and p["node_zone"] == "zone-a"
        assert rows["s3"]["s3_put_requests"] == 1 and rows["s3"]["s3_put_bytes"] == 100
        assert rows["storage"]["stored_bytes"] == 123
        # The interval was drained: the next flush has only the storage gauge.
        key2 = await writer.flush()
        assert key2 is not None
        t2 = pq.read_table(io.BytesIO(await store.get(key2))).to_pylist()
        assert {r["kind"] for r in t2} == {"storage", "s3"}  # the first usage PUT counted
        await store.close()

    asyncio.run(run())


def test_s3_requests_are_written_by_purpose(tmp_path: Path) -> None:
    from zonegate.runtime.io_class import io_class, s3_purpose

    async def run() -> None:
        store = open_object_store((tmp_path / "objects").as_uri())
        writer = UsageWriter(store, Accounting(7, "zone-a"), cluster="c1", stored_bytes=lambda: 0)
        with io_class("produce"):
            await store.put("wal/a", b"x" * 10)
            await store.put("wal/b", b"y" * 20)
        with io_class("housekeeping"), s3_purpose("gc"):
            await store.list("wal/")
            await store.delete_many(["wal/a"])
        with io_class("compaction"):
            await store.get_range("wal/b", 0, 5)
        key = await writer.flush()
        assert key is not None
        rows = pq.read_table(io.BytesIO(await store.get(key))).to_pylist()
        by = {r["s3_purpose"]: r for r in rows if r["kind"] == "s3"}
        assert set(by) == {"wal", "gc", "compaction"}
        assert (by["wal"]["s3_put_requests"], by["wal"]["s3_put_bytes"]) == (2, 30)
        gc = by["gc"]
        assert (gc["s3_list_requests"], gc["s3_delete_requests"], gc["s3_other_requests"]) == (
            1,
            1,
            2,
        )
        assert (by["compaction"]["s3_get_requests"], by["compaction"]["s3_get_bytes"]) == (1, 5)
        assert all(r["s3_purpose"] == "" for r in rows if r["kind"] != "s3")
        # The next interval holds the usage object's own PUT, under its purpose, and
        # this test's GET of it (no class named: housekeeping).
        key2 = await writer.flush()
        assert key2 is not None
        rows2 = pq.read_table(io.BytesIO(await store.get(key2))).to_pylist()
        assert {r["s3_purpose"]: (r["s3_put_requests"], r["s3_get_requests"]) for r in rows2} == {
            "usage_records": (1, 0),
            "housekeeping": (0, 1),
        }
        await store.close()

    asyncio.run(run())
