"""SQLite metadata store: the embedded default, also shared by node processes on one machine.

All statements run on one worker thread (sqlite3 connections are not shared
across threads); async callers await them through the loop's executor. WAL
journal mode with synchronous=NORMAL keeps every committed transaction across a
process crash (kill -9), which is what an acknowledged produce relies on.

The one exception is the leader's group commit (`commit_appends`, on every
produce's path): it runs on the event loop's thread, on a second connection of
that thread, when it gets the write lock within `_LOOP_BUSY_MS`. Such a commit
writes a few pages to the WAL file and never fsyncs (synchronous=NORMAL; that
connection never checkpoints, the worker does), so it takes a fraction of a
millisecond, while the hop to the worker thread and back waits for the GIL
(up to the 5 ms switch interval while the loop is busy). The lock is mostly
held by a short write of the worker itself (a heartbeat or lease renewal, one
statement each; reads take no write lock, see `_read`), which the brief wait
lets finish; when it is held longer (another process), the commit goes to the
worker thread as before, which waits for the lock there.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from zonegate.metastore.groups_sqlite import GroupTables
from zonegate.metastore.models import (
    MetaStoreError,
    NodeRecord,
    PartitionCountChanged,
    PartitionInfo,
    TopicExists,
    TopicInfo,
)
from zonegate.storage.index import (
    IndexEntry,
    PartitionCommit,
    PartitionState,
    ProducerBatch,
    ProducerEntry,
    UnknownStream,
)

T = TypeVar("T")

_SCHEMA = """
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
    PRIMARY KEY (stream_id, base_offset)
) WITHOUT ROWID;
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
    PRIMARY KEY (stream_id, producer_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nodes (
    node_id INTEGER PRIMARY KEY,
    zone TEXT NOT NULL,
    kafka_host TEXT NOT NULL,
    kafka_port INTEGER NOT NULL,
    rpc_host TEXT NOT NULL,
    rpc_port INTEGER NOT NULL,
    lease_expires_ms INTEGER NOT NULL
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
    PRIMARY KEY (group_id, topic, partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cluster_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""


class SqliteMetaStore(GroupTables):
    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metastore")
        self._conn: sqlite3.Connection | None = None
        # commit_appends' connection on the event loop's thread (see the module doc).
        self._loop_conn: sqlite3.Connection | None = None
        self._loop_thread: int | None = None
        self._loop_commits = 0
        self._checkpointing = False

    # -- plumbing ---------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, timeout=30.0)
            _use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in a write transaction on the worker thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self._tx(fn, "BEGIN IMMEDIATE"))

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in a read transaction: one snapshot, and no write lock taken.

        A transaction holds SQLite's write lock from BEGIN IMMEDIATE to COMMIT, and
        between its statements the worker waits for the GIL (up to the 5 ms switch
        interval while the loop is busy); every produce's commit needs that lock.
        So reads (the metadata polls several times a second) never take it.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self._tx(fn, "BEGIN"))

    async def _write1(self, sql: str, params: Sequence[object]) -> int:
        """One statement in its own implicit transaction; returns the rows it changed.

        The write lock is held only inside the statement's C call (the GIL released),
        never across a wait for the GIL between statements (see `_read`).
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, lambda: self._db().execute(sql, params).rowcount
        )

    def _tx(self, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
        db = self._db()
        db.execute(begin)
        try:
            result = fn(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    def _loop_db(self) -> sqlite3.Connection | None:
        """The calling (event loop) thread's connection for commit_appends, if it may have one.

        None for ":memory:" (a second connection would be another database), before
        the worker's connection has made the schema, and on any other thread than
        the one that opened it. It waits at most `_LOOP_BUSY_MS` for a lock and never
        checkpoints (the worker does, see `_note_loop_commit`).
        """
        if self._path == ":memory:" or self._conn is None or self._loop_thread == -1:
            return None
        if self._loop_conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, timeout=_LOOP_BUSY_MS / 1000)
            conn.execute(f"PRAGMA busy_timeout={_LOOP_BUSY_MS}")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA wal_autocheckpoint=0")
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.close()  # not WAL mode: leave every commit to the worker
                self._loop_thread = -1
                return None
            self._loop_conn = conn
            self._loop_thread = threading.get_ident()
        elif self._loop_thread != threading.get_ident():
            return None
        return self._loop_conn

    def _note_loop_commit(self) -> None:
        """Every so many loop-thread commits, a passive checkpoint on the worker thread.

        The loop connection's autocheckpoint is off, so that its commits never fsync;
        this keeps the WAL file from growing (the worker's own commits still
        autocheckpoint as well). PASSIVE never blocks writers.
        """
        self._loop_commits += 1
        if self._loop_commits % _CHECKPOINT_EVERY or self._checkpointing:
            return
        self._checkpointing = True

        def checkpoint() -> None:
            try:
                self._db().execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                self._checkpointing = False

        try:
            self._executor.submit(checkpoint)
        except RuntimeError:  # closing: the worker takes no more work
            self._checkpointing = False

    async def close(self) -> None:
        if self._loop_conn is not None and self._loop_thread == threading.get_ident():
            self._loop_conn.close()
            self._loop_conn = None

        def _close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await asyncio.get_running_loop().run_in_executor(self._executor, _close)
        self._executor.shutdown(wait=True)

    # -- topics -----------------------------------------------------------
    @staticmethod
    def _topic(db: sqlite3.Connection, where: str, arg: str) -> TopicInfo | None:
        row = db.execute(
            f"SELECT topic_id, name FROM topics WHERE deleted = 0 AND {where} = ?", (arg,)
        ).fetchone()
        if row is None:
            return None
        topic_id, name = row
        parts = tuple(
            PartitionInfo(uuid.UUID(topic_id), name, p, sid, leader, epoch)
            for p, sid, leader, epoch in db.execute(
                "SELECT partition, stream_id, leader_node, leader_epoch FROM partitions "
                "WHERE topic_id = ? ORDER BY partition",
                (topic_id,),
            )
        )
        configs = dict(
            db.execute("SELECT key, value FROM topic_configs WHERE topic_id = ?", (topic_id,))
        )
        return TopicInfo(uuid.UUID(topic_id), name, parts, configs)

    async def create_topic(
        self, name: str, configs: dict[str, str], leaders: Sequence[int]
    ) -> TopicInfo:
        def fn(db: sqlite3.Connection) -> TopicInfo:
            if self._topic(db, "name", name) is not None:
                raise TopicExists(f"topic {name!r} already exists")
            topic_id = str(uuid.uuid4())
            db.execute(
                "INSERT INTO topics (topic_id, name, created_ms) VALUES (?, ?, ?)",
                (topic_id, name, int(time.time() * 1000)),
            )
            db.executemany(
                "INSERT INTO topic_configs (topic_id, key, value) VALUES (?, ?, ?)",
                [(topic_id, k, v) for k, v in configs.items()],
            )
            db.executemany(
                "INSERT INTO partitions (topic_id, partition, leader_node, leader_epoch) "
                "VALUES (?, ?, ?, 0)",
                [(topic_id, p, leader) for p, leader in enumerate(leaders)],
            )
            _bump_version(db)
            info = self._topic(db, "topic_id", topic_id)
            assert info is not None
            return info

        return await self._run(fn)

    async def delete_topic(self, name: str) -> TopicInfo | None:
        def fn(db: sqlite3.Connection) -> TopicInfo | None:
            info = self._topic(db, "name", name)
            if info is None:
                return None
            # The topic row stays (deleted) so its id is never reused; the index
            # entries go, so object GC can reclaim what only they referred to.
            db.execute("UPDATE topics SET deleted = 1 WHERE topic_id = ?", (str(info.topic_id),))
            for p in info.partitions:
                db.execute("DELETE FROM stream_index WHERE stream_id = ?", (p.stream_id,))
                db.execute("DELETE FROM producer_state WHERE stream_id = ?", (p.stream_id,))
                db.execute("DELETE FROM leader_epochs WHERE stream_id = ?", (p.stream_id,))
                db.execute(
                    "UPDATE partitions SET leader_epoch = leader_epoch + 1 WHERE stream_id = ?",
                    (p.stream_id,),
                )
            # As Kafka does: groups' committed offsets of a deleted topic go with it, so a
            # topic created again under the name starts with no stale positions.
            db.execute("DELETE FROM group_offsets WHERE topic = ?", (name,))
            _bump_version(db)
            return info

        return await self._run(fn)

    async def add_partitions(
        self, name: str, leaders: Sequence[int], have: int | None = None
    ) -> TopicInfo:
        """Appends one partition per entry of `leaders`, led by that node.

        With `have`, only if the topic still has that many partitions (checked in the
        same transaction), else PartitionCountChanged: two nodes growing a topic to the
        same total at once must not both add.
        """

        def fn(db: sqlite3.Connection) -> TopicInfo:
            info = self._topic(db, "name", name)
            if info is None:
                raise MetaStoreError(f"topic {name!r} does not exist")
            if have is not None and len(info.partitions) != have:
                raise PartitionCountChanged(name, have, len(info.partitions))
            db.executemany(
                "INSERT INTO partitions (topic_id, partition, leader_node, leader_epoch) "
                "VALUES (?, ?, ?, 0)",
                [
                    (str(info.topic_id), len(info.partitions) + i, leader)
                    for i, leader in enumerate(leaders)
                ],
            )
            _bump_version(db)
            new = self._topic(db, "name", name)
            assert new is not None
            return new

        return await self._run(fn)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        def fn(db: sqlite3.Connection) -> TopicInfo:
            info = self._topic(db, "name", name)
            if info is None:
                raise MetaStoreError(f"topic {name!r} does not exist")
            db.execute("DELETE FROM topic_configs WHERE topic_id = ?", (str(info.topic_id),))
            db.executemany(
                "INSERT INTO topic_configs (topic_id, key, value) VALUES (?, ?, ?)",
                [(str(info.topic_id), k, v) for k, v in configs.items()],
            )
            _bump_version(db)
            new = self._topic(db, "name", name)
            assert new is not None
            return new

        return await self._run(fn)

    async def get_topic(self, name: str) -> TopicInfo | None:
        return await self._read(lambda db: self._topic(db, "name", name))

    async def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return await self._read(lambda db: self._topic(db, "topic_id", str(topic_id)))

    async def list_topics(self) -> list[TopicInfo]:
        def fn(db: sqlite3.Connection) -> list[TopicInfo]:
            names = [r[0] for r in db.execute("SELECT name FROM topics WHERE deleted = 0")]
            return [t for n in names if (t := self._topic(db, "name", n)) is not None]

        return await self._read(fn)

    # -- streams ----------------------------------------------------------
    async def load_partition(self, stream_id: int) -> PartitionState:
        def fn(db: sqlite3.Connection) -> PartitionState:
            # A deleted topic's partition rows stay (their stream ids are never reused),
            # but they are no partition any more: a leader must not load one and write.
            row = db.execute(
                "SELECT leader_epoch, log_start_offset, next_offset FROM partitions "
                "JOIN topics USING (topic_id) WHERE stream_id = ? AND deleted = 0",
                (stream_id,),
            ).fetchone()
            if row is None:
                raise UnknownStream(stream_id)
            producers = {
                pid: ProducerEntry(
                    pid, epoch, tuple(ProducerBatch(*b) for b in json.loads(batches))
                )
                for pid, epoch, batches in db.execute(
                    "SELECT producer_id, epoch, batches FROM producer_state WHERE stream_id = ?",
                    (stream_id,),
                )
            }
            return PartitionState(stream_id, row[0], row[1], row[2], producers)

        return await self._read(fn)

    async def read_index(self, stream_id: int) -> list[IndexEntry]:
        return await self._read(
            lambda db: [
                IndexEntry(*r)
                for r in db.execute(
                    "SELECT base_offset, last_offset, object_key, position, length, max_timestamp "
                    "FROM stream_index WHERE stream_id = ? ORDER BY base_offset",
                    (stream_id,),
                )
            ]
        )

    async def epoch_end_offset(self, stream_id: int, epoch: int) -> tuple[int, int] | None:
        def fn(db: sqlite3.Connection) -> tuple[int, int] | None:
            later = db.execute(
                "SELECT start_offset FROM leader_epochs WHERE stream_id = ? AND leader_epoch > ? "
                "ORDER BY leader_epoch LIMIT 1",
                (stream_id, epoch),
            ).fetchone()
            if later is None:
                return None
            (floor,) = db.execute(
                "SELECT MAX(leader_epoch) FROM leader_epochs WHERE stream_id = ? "
                "AND leader_epoch <= ?",
                (stream_id, epoch),
            ).fetchone()
            return (epoch if floor is None else int(floor)), int(later[0])

        return await self._read(fn)

    async def commit_appends(self, commits: Sequence[PartitionCommit]) -> set[int]:
        # One statement per kind of row for the whole cycle, not per partition: this
        # runs on every produce's path (on the loop's thread, see the module doc).
        def fn(db: sqlite3.Connection) -> set[int]:
            ids = [c.stream_id for c in commits]
            epochs = dict(
                db.execute(
                    "SELECT stream_id, leader_epoch FROM partitions "
                    f"WHERE stream_id IN ({','.join('?' * len(ids))})",
                    ids,
                ).fetchall()
            )
            fenced = {c.stream_id for c in commits if epochs.get(c.stream_id) != c.leader_epoch}
            live = [c for c in commits if c.stream_id not in fenced]
            db.executemany(
                "UPDATE partitions SET next_offset = ? WHERE stream_id = ?",
                [(c.next_offset, c.stream_id) for c in live],
            )
            db.executemany(
                "INSERT INTO stream_index (stream_id, base_offset, last_offset, object_key, "
                "position, length, max_timestamp) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        c.stream_id,
                        e.base_offset,
                        e.last_offset,
                        e.object_key,
                        e.position,
                        e.length,
                        e.max_timestamp,
                    )
                    for c in live
                    for e in c.entries
                ],
            )
            db.executemany(
                "INSERT OR REPLACE INTO producer_state "
                "(stream_id, producer_id, epoch, batches) "
                "VALUES (?, ?, ?, ?)",
                [
                    (c.stream_id, p.producer_id, p.epoch, _batches_json(p.batches))
                    for c in live
                    for p in c.producers
                ],
            )
            return fenced

        db = self._loop_db()
        if db is not None:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                    raise
                # Someone holds the write lock: wait for it on the worker, not here.
            else:
                try:
                    fenced = fn(db)
                    db.execute("COMMIT")
                except BaseException as exc:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    busy = isinstance(exc, sqlite3.OperationalError) and (
                        exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                    )
                    if not busy:
                        raise
                else:
                    self._note_loop_commit()
                    return fenced
        return await self._run(fn)

    async def allocate_producer_id(self) -> int:
        def fn(db: sqlite3.Connection) -> int:
            db.execute(
                "INSERT INTO counters (name, value) VALUES ('producer_id', 1000) "
                "ON CONFLICT(name) DO UPDATE SET value = value + 1"
            )
            value: int = db.execute(
                "SELECT value FROM counters WHERE name = 'producer_id'"
            ).fetchone()[0]
            return value

        return await self._run(fn)

    # -- membership -------------------------------------------------------
    async def register_node(self, node: NodeRecord, lease_ms: int, now_ms: int) -> None:
        await self._write1(
            "INSERT INTO nodes (node_id, zone, kafka_host, kafka_port, rpc_host, rpc_port, "
            "lease_expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(node_id) DO UPDATE "
            "SET zone = excluded.zone, kafka_host = excluded.kafka_host, "
            "kafka_port = excluded.kafka_port, rpc_host = excluded.rpc_host, "
            "rpc_port = excluded.rpc_port, lease_expires_ms = excluded.lease_expires_ms",
            (
                node.node_id,
                node.zone,
                node.kafka_host,
                node.kafka_port,
                node.rpc_host,
                node.rpc_port,
                now_ms + lease_ms,
            ),
        )

    async def expire_node(self, node_id: int) -> None:
        await self._write1("UPDATE nodes SET lease_expires_ms = 0 WHERE node_id = ?", (node_id,))

    async def list_nodes(self) -> list[NodeRecord]:
        return await self._read(
            lambda db: [
                NodeRecord(*row)
                for row in db.execute(
                    "SELECT node_id, zone, kafka_host, kafka_port, rpc_host, rpc_port, "
                    "lease_expires_ms FROM nodes ORDER BY node_id"
                )
            ]
        )

    async def acquire_lease(self, name: str, holder: int, ttl_ms: int, now_ms: int) -> bool:
        # One statement (see `_write1`): taken if free, expired, or already ours.
        changed = await self._write1(
            "INSERT INTO leases (name, holder, expires_ms) VALUES (?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, "
            "expires_ms = excluded.expires_ms "
            "WHERE leases.holder = excluded.holder OR leases.expires_ms <= ?",
            (name, holder, now_ms + ttl_ms, now_ms),
        )
        return changed == 1

    async def move_partitions(self, moves: Sequence[tuple[int, int]]) -> None:
        def fn(db: sqlite3.Connection) -> None:
            db.executemany(
                "UPDATE partitions SET leader_node = ?, leader_epoch = leader_epoch + 1 "
                "WHERE stream_id = ?",
                [(node, sid) for sid, node in moves],
            )
            # Commits are fenced by epoch in their own transactions, so the next offset
            # now is the first the new epoch can write.
            db.executemany(
                "INSERT OR REPLACE INTO leader_epochs (stream_id, leader_epoch, start_offset) "
                "SELECT stream_id, leader_epoch, next_offset FROM partitions WHERE stream_id = ?",
                [(sid,) for sid, _ in moves],
            )
            _bump_version(db)

        await self._run(fn)

    async def cluster_secret(self, name: str) -> str:
        def fn(db: sqlite3.Connection) -> str:
            # Whoever asks first makes it; everyone reads the one that was kept.
            db.execute(
                "INSERT OR IGNORE INTO cluster_secrets (name, value) VALUES (?, ?)",
                (name, secrets.token_hex(32)),
            )
            (value,) = db.execute(
                "SELECT value FROM cluster_secrets WHERE name = ?", (name,)
            ).fetchone()
            return str(value)

        return await self._run(fn)

    async def metadata_version(self) -> int:
        def fn(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT value FROM counters WHERE name = 'metadata_version'")
            found = row.fetchone()
            return int(found[0]) if found else 0

        return await self._read(fn)


_CHECKPOINT_EVERY = 256  # loop-thread commits between passive checkpoints
# How long a commit on the loop's thread waits for the write lock (SQLite's busy
# handler sleeps 1 ms, then 1 ms more, with the GIL released so the worker's
# transaction can finish) before the commit goes to the worker instead.
_LOOP_BUSY_MS = 2
_OPEN_BUSY_S = 30.0  # as the worker connection's busy timeout


def _busy(exc: sqlite3.OperationalError) -> bool:
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switches the file to WAL mode (it stays so), waiting out others doing the same.

    Nodes started together on a new file all make that switch at once. It needs an
    exclusive lock, and while another connection holds the write lock of a file not
    yet in WAL mode (making the schema, say), SQLite answers BUSY at once instead of
    calling the busy handler; so the wait the connection's timeout would give is made
    here. Once the file is in WAL mode the pragma takes no lock.
    """
    deadline = time.monotonic() + _OPEN_BUSY_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


def _bump_version(db: sqlite3.Connection) -> None:
    """Every change to topics, partitions or leaders bumps one counter nodes poll cheaply."""
    db.execute(
        "INSERT INTO counters (name, value) VALUES ('metadata_version', 1) "
        "ON CONFLICT(name) DO UPDATE SET value = value + 1"
    )


def _batches_json(batches: Sequence[ProducerBatch]) -> str:
    """The JSON list of [first_seq, last_seq, base_offset, last_offset] lists, written
    without json.dumps (a measurable part of each commit); load_partition reads it."""
    return (
        "["
        + ",".join(f"[{b.first_seq},{b.last_seq},{b.base_offset},{b.last_offset}]" for b in batches)
        + "]"
    )
