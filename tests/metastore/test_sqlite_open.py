"""SQLite only: node processes opening a new database file together all get in."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from zonegate.metastore.sqlite import SqliteMetaStore

pytestmark = pytest.mark.integration  # a database file, a worker thread


def test_opening_waits_for_a_writer_of_a_new_file(tmp_path: Path) -> None:
    """The first connection of each node switches the file to WAL mode. While another
    node holds the write lock of a file not yet switched (making the schema, say), the
    switch was answered "database is locked" at once: nodes started together failed
    now and then (the contract suite's concurrent first asks for a secret)."""
    path = str(tmp_path / "m.db")
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE other_node_was_here (x INTEGER)")  # a rollback-mode file
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()

    async def run() -> float:
        meta = SqliteMetaStore(path)
        start = time.monotonic()
        try:
            assert len(await meta.cluster_secret("rpc-token")) == 64
            return time.monotonic() - start
        finally:
            await meta.close()

    try:
        waited = asyncio.run(run())
    finally:
        release.join()
        other.close()
    assert waited >= 0.2, "got in only once the other node's write was done"
