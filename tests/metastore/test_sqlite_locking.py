"""SQLite only: reads never take the write lock. (Leases, which take it in one statement,
are in the contract suite, test_cluster_store.py.)"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.metastore.records import node
from zonegate.metastore.sqlite import SqliteMetaStore

pytestmark = pytest.mark.integration  # a database file, a worker thread


async def test_reads_do_not_wait_for_the_write_lock(tmp_path: Path) -> None:
    """The metadata polls (several a second) must not queue behind, or block, a writer."""
    path = str(tmp_path / "m.db")
    meta = SqliteMetaStore(path)
    await meta.create_topic("t", {}, [1, 1])
    await meta.register_node(node(1), 1000, 0)
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
