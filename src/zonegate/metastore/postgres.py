"""PostgreSQL metadata store: the one several machines share (anything that speaks
PostgreSQL's protocol).

asyncpg (docs/metadata-schema.md says why it and not psycopg) talks to the
server from the event loop itself: no worker thread, no GIL hop per statement.
Each store holds a small pool made on first use in the loop that uses it (a
node's serving loop and its lease keeper's thread each open their own store,
as with SQLite). Every call is one transaction.

TLS is the URL's, in libpq's names, which asyncpg honours (as do PGSSLMODE and
PGSSLROOTCERT): `?sslmode=verify-full&sslrootcert=/path/ca.pem` encrypts every
connection and checks the server's certificate and name (docs/internode-tls.md).

Concurrency is the server's: where SQLite serializes writers with BEGIN
IMMEDIATE, statements here lock the rows they depend on (`FOR UPDATE` on the
topic or partition rows, always in stream id order so two transactions never
wait on each other in a circle), and the unique indexes decide races between
creators. A transaction the server aborts as a deadlock or a serialization
failure is run again; one that cannot reach the server raises
`MetaStoreUnavailable`, which callers answer as a retriable error.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlsplit

import asyncpg

from zonegate.metastore.acls_postgres import AclTables
from zonegate.metastore.cluster_postgres import ClusterTables
from zonegate.metastore.gc_postgres import GcTables
from zonegate.metastore.groups_postgres import GroupTables
from zonegate.metastore.models import MetaStoreError, MetaStoreUnavailable
from zonegate.metastore.quotas_postgres import QuotaTables
from zonegate.metastore.scram_postgres import ScramTables
from zonegate.metastore.streams_postgres import StreamTables
from zonegate.metastore.tables_postgres import LATEST, MIGRATIONS, Db
from zonegate.metastore.txns_postgres import TxnTables

T = TypeVar("T")
log = logging.getLogger(__name__)

# Postgres's advisory lock key for migrations: any constant the cluster agrees on.
_MIGRATION_LOCK = 0x7A6F6E6567617465  # "zonegate"
_RETRIES = 5  # deadlock or serialization failure: run the transaction again
_CONNECT_TIMEOUT_S = 5.0
_COMMAND_TIMEOUT_S = 15.0
# A node's connections: the shared pool for every call, and the leader's group commits'
# own (one commit at a time, and a resend).
SHARED, COMMITS = "shared", "commits"
_POOL_SIZES = {SHARED: 4, COMMITS: 2}
# A node frozen mid-transaction (a paused process; a zone whose power or network is
# gone, its packets dropped rather than refused) keeps that transaction's row locks
# until the server notices its connection is dead, which takes TCP minutes: the
# controller's move of the frozen leader's partitions waits on those locks (for its
# 15 s command timeout, then again), so nothing failed over for a whole 14 s outage
# (tests/faults' silent zone). A node's transactions are never idle for seconds
# otherwise; the server ends one idle this long, so its locks are freed before the
# node's lease (6 s by default) ends.
_IDLE_IN_TRANSACTION_MS = 5000

# The server went away, refuses connections now, or is shutting down: nothing the
# caller did wrong, and asking again later may succeed.
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.IdleInTransactionSessionTimeoutError,  # ended while frozen
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.InterfaceError,
)
# What the server refused in the URL itself: nothing opens until the operator fixes
# it, so it is said in one line with the fix, not as the driver's traceback.
_REFUSED: tuple[tuple[type[asyncpg.PostgresError], str], ...] = (
    (asyncpg.exceptions.InvalidCatalogNameError, "create it (createdb) or name another"),
    (asyncpg.exceptions.InvalidPasswordError, "check the user and password in the URL"),
    (
        asyncpg.exceptions.InvalidAuthorizationSpecificationError,
        "create the role (createuser) or name another in the URL",
    ),
    (
        asyncpg.exceptions.InsufficientPrivilegeError,
        "grant the role CREATE on the database, or name a role that has it",
    ),
)
_AGAIN = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)


class PostgresMetaStore(
    ClusterTables,
    StreamTables,
    GroupTables,
    GcTables,
    QuotaTables,
    ScramTables,
    AclTables,
    TxnTables,
):
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        # The leader's group commits have connections of their own (COMMITS): on every
        # produce's path, they must not wait for one behind the node's other calls
        # (catalog, membership, groups, quotas...), each as slow as the link. With
        # 200 ms added to a node's link, commits waited 0.2 to 1.8 s for one of the
        # shared pool's four connections and took 0.2 s once they had it.
        self._pools: dict[str, asyncpg.Pool] = {}
        self._opening: asyncio.Lock | None = None

    async def _get_pool(self, kind: str = SHARED) -> asyncpg.Pool:
        """The pool of `kind` (SHARED or COMMITS), opened on first use; the shared one
        first, which migrates the schema."""
        pool = self._pools.get(kind)
        if pool is not None:
            return pool
        if kind != SHARED:
            await self._get_pool()
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if kind not in self._pools:
                try:
                    self._pools[kind] = await self._open(kind)
                except asyncpg.PostgresError as exc:
                    raise MetaStoreError(_refusal(self._dsn, exc)) from None
        return self._pools[kind]

    async def _open(self, kind: str) -> asyncpg.Pool:
        pool: asyncpg.Pool = await asyncpg.create_pool(
            self._dsn,
            min_size=1,
            max_size=_POOL_SIZES[kind],
            timeout=_CONNECT_TIMEOUT_S,
            command_timeout=_COMMAND_TIMEOUT_S,
            server_settings={"idle_in_transaction_session_timeout": str(_IDLE_IN_TRANSACTION_MS)},
            reset=_keep_session,
        )
        if kind != SHARED:
            return pool
        try:
            async with pool.acquire() as conn:
                await migrate(conn)
        except BaseException:
            await pool.close()
            raise
        return pool

    async def _tx(self, fn: Callable[[Db], Awaitable[T]]) -> T:
        """`fn` in one transaction (READ COMMITTED, row locks where it takes them)."""
        return await self._retried(fn, transaction=True)

    async def _one(self, fn: Callable[[Db], Awaitable[T]]) -> T:
        """`fn`'s one statement in the transaction the server makes for it: no BEGIN
        and COMMIT of its own, so a single round trip (the leader's group commit, and
        every one-statement read or write: with BEGIN and COMMIT each took three, and
        on a slow link the pool's four connections were held three times as long, so
        the commits queued behind reads for a connection)."""
        return await self._retried(fn, transaction=False)

    async def _commit(self, fn: Callable[[Db], Awaitable[T]]) -> T:
        """`fn`'s one statement, as `_one`, on the connections kept for the group commit."""
        return await self._retried(fn, transaction=False, kind=COMMITS)

    async def _retried(
        self,
        fn: Callable[[Db], Awaitable[T]],
        *,
        transaction: bool,
        kind: str = SHARED,
    ) -> T:
        for attempt in range(_RETRIES):
            try:
                pool = await self._get_pool(kind)
                async with pool.acquire() as conn:
                    if not transaction:
                        return await fn(conn)
                    async with conn.transaction():
                        return await fn(conn)
            except _AGAIN:
                if attempt == _RETRIES - 1:
                    raise
                await asyncio.sleep(0.001 * (attempt + 1))
            except MetaStoreError:
                raise
            except _UNAVAILABLE as exc:
                raise MetaStoreUnavailable(f"PostgreSQL unreachable: {_reason(exc)}") from exc
        raise AssertionError("unreachable")

    async def _read(self, fn: Callable[[Db], Awaitable[T]]) -> T:
        # READ COMMITTED sees one snapshot per statement; the reads that span several
        # statements (a topic and its partitions) take them in one REPEATABLE READ
        # transaction, which takes no locks and waits for no writer.
        for attempt in range(_RETRIES):
            try:
                pool = await self._get_pool()
                async with (
                    pool.acquire() as conn,
                    conn.transaction(isolation="repeatable_read", readonly=True),
                ):
                    return await fn(conn)
            except _AGAIN:
                if attempt == _RETRIES - 1:
                    raise
            except _UNAVAILABLE as exc:
                raise MetaStoreUnavailable(f"PostgreSQL unreachable: {_reason(exc)}") from exc
        raise AssertionError("unreachable")

    async def _write1(self, sql: str, *args: object) -> str:
        """One statement in its own transaction (the server's, as `_one`: no BEGIN and
        COMMIT round trips, which tripled a lease renewal's time on a slow link);
        returns its status ("UPDATE 1")."""

        async def fn(conn: Db) -> str:
            status: str = await conn.execute(sql, *args)
            return status

        return await self._one(fn)

    async def close(self) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            try:
                await asyncio.wait_for(pool.close(), _CONNECT_TIMEOUT_S)
            except _UNAVAILABLE:
                pool.terminate()


async def migrate(conn: Db) -> int:
    """Applies the steps of MIGRATIONS the store lacks; returns the store's version."""
    async with conn.transaction():
        # Held to the end of this transaction: a node starting at the same moment
        # waits, then finds the steps applied.
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)"
        )
        have = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        newest = max(have, default=0)
        if newest > LATEST:
            raise MetaStoreError(
                f"the metadata store's schema is version {newest}, newer than this release "
                f"knows ({LATEST}): upgrade zonegate"
            )
        for version, statements in MIGRATIONS:
            if version in have:
                continue
            await conn.execute(statements)
            await conn.execute(
                "INSERT INTO schema_migrations (version, applied_ms) "
                "VALUES ($1, (extract(epoch FROM now()) * 1000)::BIGINT)",
                version,
            )
            log.info("metadata store schema migrated to version %d", version)
    return LATEST


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Nothing to undo when a connection goes back to the pool: the store sets no
    session state (no SET, LISTEN, cursor or session advisory lock; the migration's
    lock is the transaction's). asyncpg's default reset sends a statement for it on
    every release, which the releasing caller waits for: a round trip added to each
    call, the leader's group commit on every produce among them."""


def _refusal(dsn: str, exc: asyncpg.PostgresError) -> str:
    """One line: which server, database and user (never the password), what it said,
    and what to do."""
    parts = urlsplit(dsn)
    where = f"{parts.username or '?'}@{parts.hostname}:{parts.port or 5432}{parts.path}"
    said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    fix = next((fix for kind, fix in _REFUSED if isinstance(exc, kind)), None)
    return f"PostgreSQL at {where} refused: {said}" + (f"; {fix}" if fix else "")


def _reason(exc: BaseException) -> str:
    """One line: the log line and the startup error a user reads."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        # sslmode=verify-ca/verify-full: the CA of the URL's sslrootcert did not sign it.
        return (
            f"its TLS certificate is not trusted ({exc.verify_message}): sslrootcert in the "
            "metadata store URL must name the CA that signed it"
        )
    if isinstance(exc, FileNotFoundError) and exc.filename is None:
        # The ssl module names no file: the only ones a connection opens are the URL's.
        return "a file the metadata store URL names (sslrootcert, sslcert, sslkey) is missing"
    lines = [line.strip() for line in (str(exc) or type(exc).__name__).splitlines()]
    return "; ".join(line for line in lines if line)
