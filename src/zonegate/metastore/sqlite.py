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
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from zonegate.metastore.acls_sqlite import AclTables
from zonegate.metastore.cluster_sqlite import ClusterTables
from zonegate.metastore.gc_sqlite import GcTables
from zonegate.metastore.groups_sqlite import GroupTables
from zonegate.metastore.quotas_sqlite import QuotaTables
from zonegate.metastore.scram_sqlite import ScramTables
from zonegate.metastore.streams_sqlite import StreamTables
from zonegate.metastore.tables_sqlite import SCHEMA, add_new_columns
from zonegate.metastore.txns_sqlite import TxnTables

T = TypeVar("T")


class SqliteMetaStore(
    ClusterTables,
    StreamTables,
    GroupTables,
    GcTables,
    QuotaTables,
    ScramTables,
    AclTables,
    TxnTables,
):
    """Every concern's tables (cluster_sqlite, streams_sqlite, groups_sqlite) over one
    file, through the worker's connection and the loop thread's (`SqliteTables`)."""

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metastore")
        self._conn: sqlite3.Connection | None = None
        # `_run_on_loop`'s connection on the event loop's thread (see the module doc).
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
            conn.executescript(SCHEMA)
            add_new_columns(conn)
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
        """The calling (event loop) thread's connection for `_run_on_loop`, if it may have one.

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

    async def _run_on_loop(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in a write transaction on the loop thread's connection (see the module
        doc) if it gets the write lock within `_LOOP_BUSY_MS`, else on the worker."""
        db = self._loop_db()
        if db is not None:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                # Someone holds the write lock: wait for it on the worker, not here.
            else:
                try:
                    result = fn(db)
                    db.execute("COMMIT")
                except BaseException as exc:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    if not (isinstance(exc, sqlite3.OperationalError) and _busy(exc)):
                        raise
                else:
                    self._note_loop_commit()
                    return result
        return await self._run(fn)

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
