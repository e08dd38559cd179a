"""A SQLite store made before the storage core (no append_ms, no object_key index)
opens under this release and keeps its entries (docs/metadata-schema.md)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from zonegate.metastore.sqlite import SqliteMetaStore
from zonegate.storage.index import IndexEntry, PartitionCommit

pytestmark = pytest.mark.integration

OLD_STREAM_INDEX = """
CREATE TABLE stream_index (
    stream_id INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    object_key TEXT NOT NULL,
    position INTEGER NOT NULL,
    length INTEGER NOT NULL,
    max_timestamp INTEGER NOT NULL,
    PRIMARY KEY (stream_id, base_offset)
) WITHOUT ROWID;
"""


def test_a_store_from_the_release_before_opens_and_keeps_its_entries(tmp_path: Path) -> None:
    path = str(tmp_path / "meta.db")

    async def make() -> int:
        store = SqliteMetaStore(path)
        sid = (await store.create_topic("old", {}, [1])).partitions[0].stream_id
        await store.close()
        return sid

    sid = asyncio.run(make())
    # Back to the earlier layout: the table without append_ms, no object_key index.
    db = sqlite3.connect(path)
    db.executescript(
        "DROP INDEX IF EXISTS stream_index_object; DROP TABLE stream_index;" + OLD_STREAM_INDEX
    )
    db.execute("INSERT INTO stream_index VALUES (?, 0, 4, 'wal/1/old', 0, 100, 1234)", (sid,))
    db.execute("UPDATE partitions SET next_offset = 5 WHERE stream_id = ?", (sid,))
    db.commit()
    db.close()

    async def reopen() -> list[IndexEntry]:
        store = SqliteMetaStore(path)
        try:
            await store.commit_appends(
                [PartitionCommit(sid, 0, 6, (IndexEntry(5, 5, "wal/1/new", 0, 10, 99, 777),), ())]
            )
            units = dict.fromkeys(["wal/1/old", "wal/1/gone"])
            assert await store.referenced_units(units) == {"wal/1/old"}
            return await store.read_index(sid)
        finally:
            await store.close()

    entries = asyncio.run(reopen())
    assert [(e.object_key, e.append_ms) for e in entries] == [("wal/1/old", 0), ("wal/1/new", 777)]
    db = sqlite3.connect(path)
    indexes = {r[1] for r in db.execute("PRAGMA index_list(stream_index)")}
    db.close()
    assert "stream_index_object" in indexes
