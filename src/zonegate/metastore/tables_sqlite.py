"""The SQLite store's tables, and the base its table modules build on.

One schema for the whole file (docs/metadata-schema.md describes it): the
concerns share tables where one transaction must span them (deleting a topic
drops its streams' rows and its committed offsets; a leader move records where
the new epoch starts; a commit is fenced by the partition's epoch).

`SqliteTables` is what each table module (cluster_sqlite, streams_sqlite,
groups_sqlite) runs its statements through; `SqliteMetaStore` (sqlite.py)
implements it over its connections and composes the modules.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS topics (
    topic_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS topics_live_name ON topics(name) WHERE deleted = 0;
CREATE TABLE IF NOT EXISTS topic_configs (
    topic_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (topic_id, key)
);
CREATE TABLE IF NOT EXISTS partitions (
    stream_id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic_id TEXT NOT NULL,
    partition INTEGER NOT NULL,
    leader_node INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL,
    log_start_offset INTEGER NOT NULL DEFAULT 0,
    next_offset INTEGER NOT NULL DEFAULT 0,
    preferred_node INTEGER NOT NULL DEFAULT -1,
    UNIQUE (topic_id, partition)
);
CREATE TABLE IF NOT EXISTS stream_index (
    stream_id INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    object_key TEXT NOT NULL,
    position INTEGER NOT NULL,
    length INTEGER NOT NULL,
    max_timestamp INTEGER NOT NULL,
    append_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (stream_id, base_offset)
) WITHOUT ROWID;
-- Object GC's question: is this object still named by an entry?
CREATE INDEX IF NOT EXISTS stream_index_object ON stream_index(object_key);
CREATE TABLE IF NOT EXISTS leader_epochs (
    stream_id INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL,
    start_offset INTEGER NOT NULL,
    PRIMARY KEY (stream_id, leader_epoch)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS producer_state (
    stream_id INTEGER NOT NULL,
    producer_id INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    batches TEXT NOT NULL,
    coordinator_epoch INTEGER NOT NULL DEFAULT -1,
    txn_first_offset INTEGER,
    PRIMARY KEY (stream_id, producer_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nodes (
    node_id INTEGER PRIMARY KEY,
    zone TEXT NOT NULL,
    kafka_host TEXT NOT NULL,
    kafka_port INTEGER NOT NULL,
    rpc_host TEXT NOT NULL,
    rpc_port INTEGER NOT NULL,
    lease_expires_ms INTEGER NOT NULL,
    incarnation INTEGER NOT NULL DEFAULT 0,
    endpoints TEXT NOT NULL DEFAULT '',
    unreached TEXT NOT NULL DEFAULT '',
    cut_off_ms INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    holder INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS groups (
    group_id TEXT PRIMARY KEY,
    group_type TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS group_offsets (
    group_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    committed_offset INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    commit_ms INTEGER NOT NULL,
    seq INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (group_id, topic, partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cluster_configs (
    scope TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (scope, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS gc_pending (
    unit TEXT PRIMARY KEY,
    first_seen_ms INTEGER NOT NULL,
    size INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cluster_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS client_quotas (
    entity TEXT NOT NULL,
    name TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (entity, name)
) WITHOUT ROWID;
-- KIP-554's SCRAM credentials: salted, never the password (services/scram.py).
CREATE TABLE IF NOT EXISTS scram_credentials (
    user_name TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    salt BLOB NOT NULL,
    stored_key BLOB NOT NULL,
    server_key BLOB NOT NULL,
    iterations INTEGER NOT NULL,
    PRIMARY KEY (user_name, mechanism)
) WITHOUT ROWID;
-- Kafka's ACLs (services/authorizer.py): one row per binding, its codes as Kafka's.
CREATE TABLE IF NOT EXISTS acls (
    resource_type INTEGER NOT NULL,
    resource_name TEXT NOT NULL,
    pattern_type INTEGER NOT NULL,
    principal TEXT NOT NULL,
    host TEXT NOT NULL,
    operation INTEGER NOT NULL,
    permission INTEGER NOT NULL,
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation,
                 permission)
) WITHOUT ROWID;
-- Transactions (docs/transactions.md): each coordinator shard's epoch and owner; each
-- transactional id's state, written fenced by its shard's epoch; offsets committed in a
-- transaction, pending until it ends; each partition's aborted transactions.
CREATE TABLE IF NOT EXISTS txn_shards (
    shard INTEGER PRIMARY KEY,
    epoch INTEGER NOT NULL,
    owner_node INTEGER NOT NULL,
    owner_incarnation INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS transactions (
    transactional_id TEXT PRIMARY KEY,
    shard INTEGER NOT NULL,
    producer_id INTEGER NOT NULL,
    prev_producer_id INTEGER NOT NULL,
    next_producer_id INTEGER NOT NULL,
    producer_epoch INTEGER NOT NULL,
    last_producer_epoch INTEGER NOT NULL,
    timeout_ms INTEGER NOT NULL,
    state INTEGER NOT NULL,
    partitions TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    last_update_ms INTEGER NOT NULL,
    client_version INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS transactions_shard ON transactions(shard);
CREATE TABLE IF NOT EXISTS txn_pending_offsets (
    group_id TEXT NOT NULL,
    producer_id INTEGER NOT NULL,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    offsets_partition INTEGER NOT NULL,
    committed_offset INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    commit_ms INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (group_id, producer_id, topic, partition)
) WITHOUT ROWID;
-- The commit or abort of one producer's transaction at one offsets partition.
CREATE INDEX IF NOT EXISTS txn_pending_offsets_producer
    ON txn_pending_offsets(producer_id, offsets_partition);
CREATE TABLE IF NOT EXISTS aborted_txns (
    stream_id INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    producer_id INTEGER NOT NULL,
    first_offset INTEGER NOT NULL,
    last_stable_offset INTEGER NOT NULL,
    PRIMARY KEY (stream_id, last_offset)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""

# Columns added after a release, as (table, column, definition): a file made by an
# older release gets them when a node of this one opens it (`add_new_columns`).
ADDED_COLUMNS = (
    # Node identity fenced by incarnation (docs/metadata-schema.md).
    ("nodes", "incarnation", "INTEGER NOT NULL DEFAULT 0"),
    # The leader's clock at the commit (storage core, part 1): entries written before
    # it have 0, and segments fall back to their max timestamp (docs/storage.md).
    ("stream_index", "append_ms", "INTEGER NOT NULL DEFAULT 0"),
    # Each partition's preferred leader, set by placement and reassignment; -1 (rows
    # written before it) reads as the leader (models.PartitionInfo.preferred).
    ("partitions", "preferred_node", "INTEGER NOT NULL DEFAULT -1"),
    # Each node's Kafka listeners' endpoints, JSON (models.NodeRecord.endpoints); ''
    # in rows written before: its one PLAINTEXT listener, kafka_host:kafka_port.
    ("nodes", "endpoints", "TEXT NOT NULL DEFAULT ''"),
    # A zone cut off from the others (router/reachability.py): the peers a node has not
    # reached lately, and since when the controller holds it cut off (0: it does not).
    ("nodes", "unreached", "TEXT NOT NULL DEFAULT ''"),
    ("nodes", "cut_off_ms", "INTEGER NOT NULL DEFAULT 0"),
    # Transactions (docs/transactions.md): a partition's producer keeps the coordinator
    # epoch of its last marker (-1: none) and the first offset of its open transaction
    # (NULL: none open); every offset commit its place in the order of all commits, so
    # a transaction's commit keeps a later plain one (0 in rows written before: older).
    ("producer_state", "coordinator_epoch", "INTEGER NOT NULL DEFAULT -1"),
    ("producer_state", "txn_first_offset", "INTEGER"),
    ("group_offsets", "seq", "INTEGER NOT NULL DEFAULT 0"),
)


def add_new_columns(db: sqlite3.Connection) -> None:
    """Adds ADDED_COLUMNS a file lacks, in one write transaction (nodes opening an old
    file together: the second finds the columns there)."""

    def missing() -> list[tuple[str, str, str]]:
        return [
            (table, column, definition)
            for table, column, definition in ADDED_COLUMNS
            if column not in {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        ]

    if not missing():
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for table, column, definition in missing():
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class SqliteTables(ABC):
    """How a table module's statements run (each way is explained where it is made,
    in sqlite.py): which one a call uses decides how long it holds the write lock."""

    @abstractmethod
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in one write transaction."""

    @abstractmethod
    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in one read transaction, taking no write lock."""

    @abstractmethod
    async def _write1(self, sql: str, params: Sequence[object]) -> int:
        """One statement in its own transaction; the rows it changed."""

    @abstractmethod
    async def _run_on_loop(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in one write transaction, on the event loop's thread when the write lock
        is free at once (the leader's group commit, on every produce's path)."""


def put_values(
    db: sqlite3.Connection, table: str, key_column: str, key: str, values: Mapping[str, object]
) -> None:
    """Sets the named values of `key` in a (key, name, value) table; a name given None
    is deleted. `table` and `key_column` are the code's own names, never input."""
    for name, value in values.items():
        if value is None:
            db.execute(f"DELETE FROM {table} WHERE {key_column} = ? AND name = ?", (key, name))
        else:
            db.execute(
                f"INSERT OR REPLACE INTO {table} ({key_column}, name, value) VALUES (?, ?, ?)",
                (key, name, value),
            )
