"""Which metadata-store calls take SQLite's write lock: reads never, leases in one statement."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from zonegate.metastore.models import NodeRecord
from zonegate.metastore.sqlite import SqliteMetaStore

pytestmark = pytest.mark.unit


def test_reads_do_not_wait_for_the_write_lock(tmp_path: Path) -> None:
    """The metadata polls (several a second) must not queue behind, or block, a writer."""
    path = str(tmp_path / "m.db")

    async def run() -> None:
        meta = SqliteMetaStore(path)
        await meta.create_topic("t", {}, [1, 1])
        await meta.register_node(NodeRecord(1, "a", "h", 1, "h", 2, 0), 1000, 0)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # held for the whole block below
        try:
            start = time.monotonic()
            assert [t.name for t in await meta.list_topics()] == ["t"]
            assert (await meta.get_topic("t")) is not None
            assert [n.node_id for n in await meta.list_nodes()] == [1]
            assert await meta.metadata_version() >= 1
            assert await meta.fetch_offsets("g") == []
            assert await meta.list_groups() == []
            assert time.monotonic() - start < 5, "a read waited for the write lock"
        finally:
            other.execute("COMMIT")
            other.close()
        await meta.close()

    asyncio.run(run())


def test_lease_taken_renewed_refused_and_taken_over_after_expiry(tmp_path: Path) -> None:
    async def run() -> None:
        meta = SqliteMetaStore(str(tmp_path / "m.db"))
        assert await meta.acquire_lease("controller", 1, ttl_ms=1000, now_ms=0)
        assert await meta.acquire_lease("controller", 1, ttl_ms=1000, now_ms=500), "renewed"
        assert not await meta.acquire_lease("controller", 2, ttl_ms=1000, now_ms=1000)
        assert not await meta.acquire_lease("controller", 2, ttl_ms=1000, now_ms=1499)
        assert await meta.acquire_lease("controller", 2, ttl_ms=1000, now_ms=1500), "expired"
        assert not await meta.acquire_lease("controller", 1, ttl_ms=1000, now_ms=1600)
        assert await meta.acquire_lease("other", 1, ttl_ms=1000, now_ms=1600), "another name"
        await meta.close()

    asyncio.run(run())
