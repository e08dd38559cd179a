"""A store made by the previous release opens, and is migrated forward on open; a store
made by a newer release is refused by name (backend by backend: each keeps its own
record of what its schema is)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import asyncpg
import pytest

from tests.metastore.records import node
from tests.postgres_server import PostgresServer
from zonegate.metastore.api import open_metastore
from zonegate.metastore.models import MetaStoreError, ScramRecord
from zonegate.metastore.tables_postgres import LATEST, MIGRATIONS

pytestmark = pytest.mark.integration

# The nodes table as release 0.1.0 made it, before node incarnations.
_NODES_0_1 = """
CREATE TABLE nodes (
    node_id INTEGER PRIMARY KEY, zone TEXT NOT NULL, kafka_host TEXT NOT NULL,
    kafka_port INTEGER NOT NULL, rpc_host TEXT NOT NULL, rpc_port INTEGER NOT NULL,
    lease_expires_ms INTEGER NOT NULL
);
INSERT INTO nodes VALUES (7, 'zone-a', 'k', 9092, 'r', 9093, 5);
"""


async def test_a_sqlite_file_of_the_previous_release_opens(tmp_path: Path) -> None:
    path = tmp_path / "meta.db"
    old = sqlite3.connect(path)
    old.executescript(_NODES_0_1)
    old.close()
    store = open_metastore(f"sqlite://{path}")
    try:
        me = dataclasses.replace(node(1), incarnation=3)
        assert await store.register_node(me, 1000, 0)
        nodes = await store.list_nodes()
        assert nodes[0] == dataclasses.replace(me, lease_expires_ms=1000)
        assert nodes[1].node_id == 7 and nodes[1].incarnation == 0, "old rows kept"
        assert nodes[1].endpoint("PLAINTEXT") == ("k", 9092), "its one listener, as before"
        # Tables added since (SCRAM credentials) are made on open.
        cred = ScramRecord("alice", "SCRAM-SHA-512", b"s", b"k", b"v", 4096)
        assert await store.alter_scram_credentials([cred], []) == []
        assert await store.scram_credentials() == [cred]
    finally:
        await store.close()


async def test_a_postgresql_store_of_the_previous_release_is_migrated(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database()
    conn = await asyncpg.connect(url)
    try:
        # What release 0.1.0's first step left: schema version 1.
        await conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_ms BIGINT "
            "NOT NULL); INSERT INTO schema_migrations VALUES (1, 0);"
        )
        await conn.execute(MIGRATIONS[0][1])
        await conn.execute("INSERT INTO nodes VALUES (7, 'zone-a', 'k', 9092, 'r', 9093, 5)")
    finally:
        await conn.close()
    store = open_metastore(url)
    try:
        me = dataclasses.replace(node(1), incarnation=3)
        assert await store.register_node(me, 1000, 0)
        nodes = await store.list_nodes()
        assert nodes[0] == dataclasses.replace(me, lease_expires_ms=1000)
        assert nodes[1].node_id == 7 and nodes[1].incarnation == 0, "old rows kept"
        assert nodes[1].endpoint("PLAINTEXT") == ("k", 9092), "its one listener, as before"
        cred = ScramRecord("alice", "SCRAM-SHA-512", b"s", b"k", b"v", 4096)
        assert await store.alter_scram_credentials([cred], []) == []
        assert await store.scram_credentials() == [cred]
    finally:
        await store.close()
    conn = await asyncpg.connect(url)
    try:
        versions = [r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")]
        assert sorted(versions) == list(range(1, LATEST + 1))
    finally:
        await conn.close()


async def test_a_postgresql_store_of_a_newer_release_is_refused(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database()
    store = open_metastore(url)
    await store.list_nodes()  # made at the latest version
    await store.close()
    conn = await asyncpg.connect(url)
    await conn.execute("INSERT INTO schema_migrations VALUES ($1, 0)", LATEST + 1)
    await conn.close()
    store = open_metastore(url)
    with pytest.raises(MetaStoreError, match=f"version {LATEST + 1}, newer than"):
        await store.list_nodes()
    await store.close()
