"""Partitions' streams in the PostgreSQL store: `StreamStore` (storage/index.py),
statement by statement as streams_sqlite.py."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import asyncpg

from zonegate.metastore.models import MetaStoreUnavailable
from zonegate.metastore.streams_sqlite import (
    _ABORTED,
    _ENTRY,
    _PRODUCER,
    _batches_json,
    aborted_values,
)
from zonegate.metastore.tables_postgres import Db, PostgresTables
from zonegate.storage.index import (
    IndexEntry,
    LeaderEpochFenced,
    PartitionCommit,
    PartitionState,
    ProducerBatch,
    ProducerEntry,
    UnknownStream,
)
from zonegate.transactions.partition_txns import AbortedTxn


class StreamTables(PostgresTables):
    async def load_partition(self, stream_id: int) -> PartitionState:
        async def fn(db: Db) -> PartitionState:
            # A deleted topic's partition rows stay (their stream ids are never reused),
            # but they are no partition any more: a leader must not load one and write.
            row = await db.fetchrow(
                "SELECT leader_epoch, log_start_offset, next_offset FROM partitions "
                "JOIN topics USING (topic_id) WHERE stream_id = $1 AND deleted = 0",
                stream_id,
            )
            if row is None:
                raise UnknownStream(stream_id)
            producers = {
                r[0]: ProducerEntry(
                    r[0], r[1], tuple(ProducerBatch(*b) for b in json.loads(r[2])), r[3], r[4]
                )
                for r in await db.fetch(
                    f"SELECT {_PRODUCER} FROM producer_state WHERE stream_id = $1", stream_id
                )
            }
            aborted = tuple(
                AbortedTxn(*r)
                for r in await db.fetch(
                    f"SELECT {_ABORTED} FROM aborted_txns WHERE stream_id = $1 "
                    "AND last_offset >= $2 ORDER BY last_offset",
                    stream_id,
                    row[1],
                )
            )
            return PartitionState(stream_id, row[0], row[1], row[2], producers, aborted)

        return await self._read(fn)

    async def read_index(self, stream_id: int) -> list[IndexEntry]:
        async def fn(db: Db) -> list[IndexEntry]:
            return [
                IndexEntry(*r)
                for r in await db.fetch(
                    "SELECT base_offset, last_offset, object_key, position, length, "
                    "max_timestamp, append_ms FROM stream_index WHERE stream_id = $1 "
                    "ORDER BY base_offset",
                    stream_id,
                )
            ]

        return await self._one(fn)  # one statement: one round trip

    async def epoch_end_offset(self, stream_id: int, epoch: int) -> tuple[int, int] | None:
        async def fn(db: Db) -> tuple[int, int] | None:
            later = await db.fetchval(
                "SELECT start_offset FROM leader_epochs WHERE stream_id = $1 "
                "AND leader_epoch > $2 ORDER BY leader_epoch LIMIT 1",
                stream_id,
                epoch,
            )
            if later is None:
                return None
            floor = await db.fetchval(
                "SELECT MAX(leader_epoch) FROM leader_epochs WHERE stream_id = $1 "
                "AND leader_epoch <= $2",
                stream_id,
                epoch,
            )
            return (epoch if floor is None else int(floor)), int(later)

        return await self._read(fn)

    async def commit_appends(self, commits: Sequence[PartitionCommit]) -> set[int]:
        # One statement, run as its own transaction: one round trip to the server for
        # the whole group commit, which is on every produce's path (a leader's link to
        # the server slowed by d adds d to its produces, not six times d).
        entries = [(c.stream_id, e) for c in commits for e in c.entries]
        producers = [(c.stream_id, p) for c in commits for p in c.producers]
        args = (
            [c.stream_id for c in commits],
            [c.leader_epoch for c in commits],
            [c.next_offset for c in commits],
            [c.entries[0].base_offset if c.entries else -1 for c in commits],
            [c.entries[0].object_key if c.entries else "" for c in commits],
            [c.entries[0].position if c.entries else -1 for c in commits],
            *_entry_columns(entries),
            [sid for sid, _ in producers],
            [p.producer_id for _, p in producers],
            [p.epoch for _, p in producers],
            [_batches_json(p.batches) for _, p in producers],
            [p.coordinator_epoch for _, p in producers],
            [p.txn_first_offset for _, p in producers],
            *_aborted_columns([(c.stream_id, a) for c in commits for a in c.aborted]),
        )

        async def fn(db: Db) -> set[int]:
            return {int(r[0]) for r in await db.fetch(_COMMIT, *args)}

        # A connection lost with the statement sent leaves its outcome unknown: the
        # server may have committed it. The statement is idempotent (a commit whose
        # first entry is already indexed lands nothing again and is not fenced), so it
        # is sent again until the server answers or `_COMMIT_RETRY_S` passes: the
        # leader learns the outcome itself instead of answering REQUEST_TIMED_OUT,
        # which a client may resolve by re-sending the records under a new producer
        # epoch (librdkafka's epoch bump after a gap elsewhere), duplicating them.
        deadline = time.monotonic() + _COMMIT_RETRY_S
        sent = False
        while True:
            try:
                return await self._commit(fn)
            except MetaStoreUnavailable:
                if time.monotonic() >= deadline:
                    raise
                sent = True
            except asyncpg.UniqueViolationError:
                # A resend that raced the lost attempt's own commit (its snapshot
                # predates it): the next send sees that attempt's entries.
                if not sent or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(_COMMIT_RETRY_PAUSE_S)

    async def read_entries(
        self, stream_id: int, offset: int, *, to_offset: int | None = None, limit: int = 500
    ) -> list[IndexEntry]:
        upper = _MAX_OFFSET if to_offset is None else to_offset

        async def fn(db: Db) -> list[IndexEntry]:
            rows = await db.fetch(
                f"SELECT {_ENTRY} FROM stream_index WHERE stream_id = $1 AND base_offset >= "
                "(SELECT COALESCE(MAX(base_offset), $2) FROM stream_index "
                "WHERE stream_id = $1 AND base_offset <= $2) "
                "AND last_offset >= $2 AND base_offset <= $3 ORDER BY base_offset LIMIT $4",
                stream_id,
                offset,
                upper,
                limit,
            )
            return [IndexEntry(*r) for r in rows]

        return await self._one(fn)  # one statement: one round trip

    async def entries_at_time(
        self, stream_id: int, timestamp: int, from_offset: int, to_offset: int, limit: int = 4
    ) -> list[IndexEntry]:
        async def fn(db: Db) -> list[IndexEntry]:
            rows = await db.fetch(
                f"SELECT {_ENTRY} FROM stream_index WHERE stream_id = $1 AND base_offset "
                "BETWEEN $2 AND $3 AND max_timestamp >= $4 ORDER BY base_offset LIMIT $5",
                stream_id,
                from_offset,
                to_offset,
                timestamp,
                limit,
            )
            return [IndexEntry(*r) for r in rows]

        return await self._one(fn)  # one statement: one round trip

    async def newest_entry(
        self, stream_id: int, from_offset: int, to_offset: int
    ) -> IndexEntry | None:
        async def fn(db: Db) -> IndexEntry | None:
            row = await db.fetchrow(
                f"SELECT {_ENTRY} FROM stream_index WHERE stream_id = $1 AND base_offset "
                "BETWEEN $2 AND $3 ORDER BY max_timestamp DESC, base_offset LIMIT 1",
                stream_id,
                from_offset,
                to_offset,
            )
            return None if row is None else IndexEntry(*row)

        return await self._one(fn)  # one statement: one round trip

    async def replace_entries(
        self,
        stream_id: int,
        leader_epoch: int,
        old: Sequence[IndexEntry],
        new: Sequence[IndexEntry],
        *,
        drop_aborted: Sequence[int] = (),
    ) -> bool:
        if not old:
            raise ValueError("nothing to replace")

        async def fn(db: Db) -> bool:
            start = await _fenced_log_start(db, stream_id, leader_epoch)
            bases = [e.base_offset for e in old]
            have = {
                (int(r[0]), str(r[1]))
                for r in await db.fetch(
                    "SELECT base_offset, object_key FROM stream_index WHERE stream_id = $1 "
                    "AND base_offset = ANY($2::bigint[])",
                    stream_id,
                    bases,
                )
            }
            if have != {(e.base_offset, e.object_key) for e in old}:
                return False
            await db.execute(
                "DELETE FROM stream_index WHERE stream_id = $1 AND base_offset = ANY($2::bigint[])",
                stream_id,
                bases,
            )
            await _insert_entries(db, [(stream_id, e) for e in new if e.last_offset >= start])
            if drop_aborted:
                await db.execute(
                    "DELETE FROM aborted_txns WHERE stream_id = $1 "
                    "AND last_offset = ANY($2::bigint[])",
                    stream_id,
                    list(drop_aborted),
                )
            return True

        return await self._tx(fn)

    async def truncate_head(self, stream_id: int, leader_epoch: int, log_start: int) -> int:
        async def fn(db: Db) -> int:
            start = max(await _fenced_log_start(db, stream_id, leader_epoch), log_start)
            await db.execute(
                "UPDATE partitions SET log_start_offset = $1 WHERE stream_id = $2",
                start,
                stream_id,
            )
            await db.execute(
                "DELETE FROM stream_index WHERE stream_id = $1 AND last_offset < $2",
                stream_id,
                start,
            )
            await db.execute(
                "DELETE FROM aborted_txns WHERE stream_id = $1 AND last_offset < $2",
                stream_id,
                start,
            )
            return start

        return await self._tx(fn)


_MAX_OFFSET = (1 << 63) - 1

_COMMIT_RETRY_S = 5.0  # a lost commit is sent again for this long (a flapping link)
_COMMIT_RETRY_PAUSE_S = 0.1

# The group commit (commit_appends) as one statement; returns the stream ids fenced.
# `locked` takes the partitions' row locks in stream id order, as a leader move
# takes them, so the two never wait on each other in a circle and one lands wholly
# before the other; waiting for a lock, READ COMMITTED reads the row as the other
# transaction left it, so an epoch moved meanwhile fences. A partition with no row
# is fenced, as one whose epoch moved. Of the others, one whose first entry is
# already indexed at its offset (same object, same position) is this very commit
# sent again after a lost answer: it lands nothing twice. The rest (`todo`) get
# their next offset, entries and producer states.
_COMMIT = f"""
WITH c AS (
    SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::bigint[], $5::text[],
        $6::bigint[]) AS c(sid, epoch, next, start, key, pos)
), locked AS MATERIALIZED (
    SELECT stream_id, leader_epoch FROM partitions WHERE stream_id = ANY($1::bigint[])
    ORDER BY stream_id FOR UPDATE
), live AS MATERIALIZED (
    SELECT c.sid, c.next, EXISTS (
        SELECT 1 FROM stream_index i WHERE i.stream_id = c.sid AND i.base_offset = c.start
        AND i.object_key = c.key AND i.position = c.pos
    ) AS landed FROM c
    JOIN locked ON locked.stream_id = c.sid AND locked.leader_epoch = c.epoch
), todo AS MATERIALIZED (
    SELECT sid, next FROM live WHERE NOT landed
), moved AS (
    UPDATE partitions p SET next_offset = todo.next FROM todo WHERE p.stream_id = todo.sid
), indexed AS (
    INSERT INTO stream_index (stream_id, {_ENTRY})
    SELECT * FROM unnest($7::bigint[], $8::bigint[], $9::bigint[], $10::text[],
        $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[])
        AS e(sid, base, last, key, pos, len, ts, ms)
    WHERE e.sid IN (SELECT sid FROM todo)
), produced AS (
    INSERT INTO producer_state (stream_id, {_PRODUCER})
    SELECT * FROM unnest($15::bigint[], $16::bigint[], $17::int[], $18::text[],
        $19::int[], $20::bigint[]) AS s(sid, pid, epoch, batches, cepoch, first)
    WHERE s.sid IN (SELECT sid FROM todo)
    ON CONFLICT (stream_id, producer_id) DO UPDATE
    SET epoch = excluded.epoch, batches = excluded.batches,
        coordinator_epoch = excluded.coordinator_epoch,
        txn_first_offset = excluded.txn_first_offset
), aborted AS (
    INSERT INTO aborted_txns (stream_id, {_ABORTED})
    SELECT * FROM unnest($21::bigint[], $22::bigint[], $23::bigint[], $24::bigint[],
        $25::bigint[]) AS a(sid, pid, first, last, lso)
    WHERE a.sid IN (SELECT sid FROM todo)
)
SELECT sid FROM c WHERE sid NOT IN (SELECT sid FROM live)
"""


def _aborted_columns(rows: Sequence[tuple[int, AbortedTxn]]) -> list[list[int]]:
    """aborted_txns' column arrays for (stream id, aborted transaction) rows, to unnest."""
    values = [(sid, *aborted_values(a)) for sid, a in rows]
    return [[v[i] for v in values] for i in range(5)]


async def _insert_entries(db: Db, rows: Sequence[tuple[int, IndexEntry]]) -> None:
    """Inserts (stream id, entry) rows in one statement: a column array each, unnested."""
    await db.execute(
        f"INSERT INTO stream_index (stream_id, {_ENTRY}) SELECT * FROM unnest("
        "$1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[], "
        "$6::bigint[], $7::bigint[], $8::bigint[])",
        *_entry_columns(rows),
    )


def _entry_columns(rows: Sequence[tuple[int, IndexEntry]]) -> list[list[object]]:
    """(stream id, entry) rows as the column arrays of stream_index's insert, in
    `_ENTRY`'s order after the stream id: unnested by `_insert_entries` and `_COMMIT`."""
    return [
        [sid for sid, _ in rows],
        [e.base_offset for _, e in rows],
        [e.last_offset for _, e in rows],
        [e.object_key for _, e in rows],
        [e.position for _, e in rows],
        [e.length for _, e in rows],
        [e.max_timestamp for _, e in rows],
        [e.append_ms for _, e in rows],
    ]


async def _fenced_log_start(db: Db, stream_id: int, leader_epoch: int) -> int:
    """The partition's log start offset, its row locked as a commit locks it (a commit
    or a leader move lands wholly before or after); UnknownStream or LeaderEpochFenced
    first."""
    row = await db.fetchrow(
        "SELECT leader_epoch, log_start_offset FROM partitions "
        "JOIN topics USING (topic_id) WHERE stream_id = $1 AND deleted = 0 "
        "FOR UPDATE OF partitions",
        stream_id,
    )
    if row is None:
        raise UnknownStream(stream_id)
    if row[0] != leader_epoch:
        raise LeaderEpochFenced(stream_id, leader_epoch, row[0])
    return int(row[1])
