"""The PostgreSQL store's schema, as numbered migrations applied forward on open.

The tables are SQLite's (tables_sqlite.py, docs/metadata-schema.md) column by
column, with PostgreSQL's types: BIGINT wherever SQLite stores a 64-bit
INTEGER, BIGSERIAL for stream ids (never reused, as AUTOINCREMENT), and
`COLLATE "C"` on text keys so rows come back in the byte order SQLite's
BINARY collation gives them (the contract suite asserts orders).

`schema_migrations` records each applied step; a node opening the store
applies the steps it knows and the store lacks, in order, each in its own
transaction, under an advisory lock so nodes starting together never run one
step twice. A store written by a newer release (a step this one does not
know) is refused instead of guessed at.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import asyncpg

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

T = TypeVar("T")
# What a statement runs on: a pooled connection (generic only in the stubs).
Db: TypeAlias = "PoolConnectionProxy[asyncpg.Record]"

# (version, statements). Append only: a released step is never edited, because
# stores made by that release already ran it.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
CREATE TABLE topics (
    topic_id TEXT COLLATE "C" PRIMARY KEY,
    name TEXT COLLATE "C" NOT NULL,
    created_ms BIGINT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX topics_live_name ON topics(name) WHERE deleted = 0;
CREATE TABLE topic_configs (
    topic_id TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (topic_id, key)
);
CREATE TABLE partitions (
    stream_id BIGSERIAL PRIMARY KEY,
    topic_id TEXT COLLATE "C" NOT NULL,
    partition INTEGER NOT NULL,
    leader_node BIGINT NOT NULL,
    leader_epoch INTEGER NOT NULL,
    log_start_offset BIGINT NOT NULL DEFAULT 0,
    next_offset BIGINT NOT NULL DEFAULT 0,
    UNIQUE (topic_id, partition)
);
CREATE TABLE stream_index (
    stream_id BIGINT NOT NULL,
    base_offset BIGINT NOT NULL,
    last_offset BIGINT NOT NULL,
    object_key TEXT NOT NULL,
    position BIGINT NOT NULL,
    length BIGINT NOT NULL,
    max_timestamp BIGINT NOT NULL,
    PRIMARY KEY (stream_id, base_offset)
);
CREATE TABLE leader_epochs (
    stream_id BIGINT NOT NULL,
    leader_epoch INTEGER NOT NULL,
    start_offset BIGINT NOT NULL,
    PRIMARY KEY (stream_id, leader_epoch)
);
CREATE TABLE producer_state (
    stream_id BIGINT NOT NULL,
    producer_id BIGINT NOT NULL,
    epoch INTEGER NOT NULL,
    batches TEXT NOT NULL,
    PRIMARY KEY (stream_id, producer_id)
);
CREATE TABLE nodes (
    node_id BIGINT PRIMARY KEY,
    zone TEXT NOT NULL,
    kafka_host TEXT NOT NULL,
    kafka_port INTEGER NOT NULL,
    rpc_host TEXT NOT NULL,
    rpc_port INTEGER NOT NULL,
    lease_expires_ms BIGINT NOT NULL
);
CREATE TABLE leases (
    name TEXT COLLATE "C" PRIMARY KEY,
    holder BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
CREATE TABLE groups (
    group_id TEXT COLLATE "C" PRIMARY KEY,
    group_type TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE group_offsets (
    group_id TEXT COLLATE "C" NOT NULL,
    topic TEXT COLLATE "C" NOT NULL,
    partition INTEGER NOT NULL,
    committed_offset BIGINT NOT NULL,
    leader_epoch INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    commit_ms BIGINT NOT NULL,
    PRIMARY KEY (group_id, topic, partition)
);
CREATE TABLE cluster_secrets (
    name TEXT COLLATE "C" PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE counters (
    name TEXT COLLATE "C" PRIMARY KEY,
    value BIGINT NOT NULL
);
""",
    ),
    (
        2,
        # Node identity is fenced by incarnation: each start of a node process picks
        # a new one, and a lease is renewed only by the incarnation that holds it.
        "ALTER TABLE nodes ADD COLUMN incarnation BIGINT NOT NULL DEFAULT 0;",
    ),
    (
        3,
        # Storage core, part 1 (docs/storage.md): the leader's clock at the commit;
        # object GC's question "is this object still named?" through an index on the
        # key, in byte order so a pack file's objects are one range; defaults of topic
        # configs by scope; units waiting out the GC grace.
        """
ALTER TABLE stream_index ADD COLUMN append_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE stream_index ALTER COLUMN object_key TYPE TEXT COLLATE "C";
CREATE INDEX stream_index_object ON stream_index(object_key);
CREATE TABLE cluster_configs (
    scope TEXT COLLATE "C" NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (scope, name)
);
CREATE TABLE gc_pending (
    unit TEXT COLLATE "C" PRIMARY KEY,
    first_seen_ms BIGINT NOT NULL,
    size BIGINT NOT NULL
);
""",
    ),
    (
        4,
        # Kafka's client quotas (docs/qos.md): per entity (user, client id, both, or
        # their defaults, as JSON), each quota key's value.
        """
CREATE TABLE client_quotas (
    entity TEXT COLLATE "C" NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    value DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (entity, name)
);
""",
    ),
    (
        5,
        # Each partition's preferred leader (reassignment, leader balance); -1 in rows
        # written before: the leader (models.PartitionInfo.preferred).
        "ALTER TABLE partitions ADD COLUMN preferred_node BIGINT NOT NULL DEFAULT -1;",
    ),
    (
        6,
        # KIP-554's SCRAM credentials (services/scram.py): per user and mechanism, the
        # salt, the keys derived from the salted password and the iteration count.
        """
CREATE TABLE scram_credentials (
    user_name TEXT COLLATE "C" NOT NULL,
    mechanism TEXT COLLATE "C" NOT NULL,
    salt BYTEA NOT NULL,
    stored_key BYTEA NOT NULL,
    server_key BYTEA NOT NULL,
    iterations INTEGER NOT NULL,
    PRIMARY KEY (user_name, mechanism)
);
""",
    ),
    (
        7,
        # Each node's Kafka listeners' endpoints, JSON (models.NodeRecord.endpoints); ''
        # in rows written before: its one PLAINTEXT listener, kafka_host:kafka_port.
        "ALTER TABLE nodes ADD COLUMN endpoints TEXT NOT NULL DEFAULT '';",
    ),
    (
        8,
        # Kafka's ACLs (services/authorizer.py): one row per binding, Kafka's codes; the
        # counter `acl_version` moves with every change, so nodes reload only then.
        """
CREATE TABLE acls (
    resource_type SMALLINT NOT NULL,
    resource_name TEXT COLLATE "C" NOT NULL,
    pattern_type SMALLINT NOT NULL,
    principal TEXT COLLATE "C" NOT NULL,
    host TEXT COLLATE "C" NOT NULL,
    operation SMALLINT NOT NULL,
    permission SMALLINT NOT NULL,
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation,
                 permission)
);
""",
    ),
    (
        9,
        # A zone cut off from the others (router/reachability.py): the peers each node
        # has not reached lately, which it writes with its renewal, and since when the
        # controller holds the node cut off (0: it does not).
        "ALTER TABLE nodes ADD COLUMN unreached TEXT NOT NULL DEFAULT '';"
        "ALTER TABLE nodes ADD COLUMN cut_off_ms BIGINT NOT NULL DEFAULT 0;",
    ),
    (
        10,
        # Transactions (docs/transactions.md): each coordinator shard's epoch and owner;
        # each transactional id's state, written fenced by its shard's epoch; offsets
        # committed in a transaction, pending until it ends, and every commit's place in
        # the order of all commits (`seq`: the later of a plain and a transactional one
        # wins); each partition's aborted transactions, and per producer the coordinator
        # epoch of its last marker and the first offset of its open transaction.
        """
CREATE TABLE txn_shards (
    shard INTEGER PRIMARY KEY,
    epoch INTEGER NOT NULL,
    owner_node BIGINT NOT NULL,
    owner_incarnation BIGINT NOT NULL
);
CREATE TABLE transactions (
    transactional_id TEXT COLLATE "C" PRIMARY KEY,
    shard INTEGER NOT NULL,
    producer_id BIGINT NOT NULL,
    prev_producer_id BIGINT NOT NULL,
    next_producer_id BIGINT NOT NULL,
    producer_epoch INTEGER NOT NULL,
    last_producer_epoch INTEGER NOT NULL,
    timeout_ms INTEGER NOT NULL,
    state SMALLINT NOT NULL,
    partitions TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    last_update_ms BIGINT NOT NULL,
    client_version SMALLINT NOT NULL
);
CREATE INDEX transactions_shard ON transactions(shard);
CREATE TABLE txn_pending_offsets (
    group_id TEXT COLLATE "C" NOT NULL,
    producer_id BIGINT NOT NULL,
    topic TEXT COLLATE "C" NOT NULL,
    partition INTEGER NOT NULL,
    offsets_partition INTEGER NOT NULL,
    committed_offset BIGINT NOT NULL,
    leader_epoch INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    commit_ms BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (group_id, producer_id, topic, partition)
);
CREATE INDEX txn_pending_offsets_producer ON txn_pending_offsets(producer_id, offsets_partition);
CREATE TABLE aborted_txns (
    stream_id BIGINT NOT NULL,
    last_offset BIGINT NOT NULL,
    producer_id BIGINT NOT NULL,
    first_offset BIGINT NOT NULL,
    last_stable_offset BIGINT NOT NULL,
    PRIMARY KEY (stream_id, last_offset)
);
ALTER TABLE group_offsets ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE producer_state ADD COLUMN coordinator_epoch INTEGER NOT NULL DEFAULT -1;
ALTER TABLE producer_state ADD COLUMN txn_first_offset BIGINT;
""",
    ),
)

LATEST = MIGRATIONS[-1][0]


class PostgresTables(ABC):
    """How a table module's statements run (postgres.py makes each way)."""

    @abstractmethod
    async def _tx(self, fn: Callable[[Db], Awaitable[T]]) -> T:
        """`fn` in one read-write transaction; deadlocks are run again."""

    @abstractmethod
    async def _one(self, fn: Callable[[Db], Awaitable[T]]) -> T:
        """`fn`, which sends one statement, as that statement's own transaction: one
        round trip; deadlocks are run again."""

    @abstractmethod
    async def _commit(self, fn: Callable[[Db], Awaitable[T]]) -> T:
        """`fn`'s one statement, as `_one`, on connections kept for the leader's group
        commit (never waiting behind the node's other calls for one)."""

    @abstractmethod
    async def _read(self, fn: Callable[[Db], Awaitable[T]]) -> T:
        """`fn` in one read-only snapshot, waiting for no writer."""

    @abstractmethod
    async def _write1(self, sql: str, *args: object) -> str:
        """One statement in its own transaction; its status ("UPDATE 1")."""


def changed_rows(status: str) -> int:
    """The row count of a command status: "INSERT 0 1" -> 1, "UPDATE 3" -> 3."""
    return int(status.rsplit(" ", 1)[-1])


async def put_values(
    db: Db, table: str, key_column: str, key: str, values: Mapping[str, object]
) -> None:
    """Sets the named values of `key` in a (key, name, value) table; a name given None
    is deleted. `table` and `key_column` are the code's own names, never input."""
    for name, value in values.items():
        if value is None:
            await db.execute(
                f"DELETE FROM {table} WHERE {key_column} = $1 AND name = $2", key, name
            )
        else:
            await db.execute(
                f"INSERT INTO {table} ({key_column}, name, value) VALUES ($1, $2, $3) "
                f"ON CONFLICT ({key_column}, name) DO UPDATE SET value = excluded.value",
                key,
                name,
                value,
            )
