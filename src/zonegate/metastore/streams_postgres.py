"""Partitions' streams in the PostgreSQL store: `StreamStore` (storage/index.py),
statement by statement as streams_sqlite.py."""

from __future__ import annotations

import json
from collections.abc import Sequence

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

        return await self._read(fn)

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
        # One statement per kind of row for the whole cycle, as SQLite's: this runs on
        # every produce's path, and each statement is a round trip to the server.
        async def fn(db: Db) -> set[int]:
            ids = sorted(c.stream_id for c in commits)
            # The rows stay locked to the commit, so a leader move (which locks them
            # too, in the same order) lands wholly before or wholly after this.
            epochs = {
                r[0]: r[1]
                for r in await db.fetch(
                    "SELECT stream_id, leader_epoch FROM partitions WHERE stream_id = ANY($1) "
                    "ORDER BY stream_id FOR UPDATE",
                    ids,
                )
            }
            fenced = {c.stream_id for c in commits if epochs.get(c.stream_id) != c.leader_epoch}
            live = [c for c in commits if c.stream_id not in fenced]
            if not live:
                return fenced
            await db.execute(
                "UPDATE partitions p SET next_offset = v.next FROM "
                "unnest($1::bigint[], $2::bigint[]) AS v(sid, next) WHERE p.stream_id = v.sid",
                [c.stream_id for c in live],
                [c.next_offset for c in live],
            )
            await _insert_entries(db, [(c.stream_id, e) for c in live for e in c.entries])
            producers = [(c.stream_id, p) for c in live for p in c.producers]
            if producers:
                await db.execute(
                    f"INSERT INTO producer_state (stream_id, {_PRODUCER}) "
                    "SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], "
                    "$5::int[], $6::bigint[]) "
                    "ON CONFLICT (stream_id, producer_id) DO UPDATE "
                    "SET epoch = excluded.epoch, batches = excluded.batches, "
                    "coordinator_epoch = excluded.coordinator_epoch, "
                    "txn_first_offset = excluded.txn_first_offset",
                    [sid for sid, _ in producers],
                    [p.producer_id for _, p in producers],
                    [p.epoch for _, p in producers],
                    [_batches_json(p.batches) for _, p in producers],
                    [p.coordinator_epoch for _, p in producers],
                    [p.txn_first_offset for _, p in producers],
                )
            aborted = [(c.stream_id, *aborted_values(a)) for c in live for a in c.aborted]
            if aborted:  # only a cycle with an abort marker pays the round trip
                await db.executemany(
                    f"INSERT INTO aborted_txns (stream_id, {_ABORTED}) VALUES ($1, $2, $3, $4, $5)",
                    aborted,
                )
            return fenced

        return await self._tx(fn)

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

        return await self._read(fn)

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

        return await self._read(fn)

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

        return await self._read(fn)

    async def replace_entries(
        self,
        stream_id: int,
        leader_epoch: int,
        old: Sequence[IndexEntry],
        new: Sequence[IndexEntry],
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


async def _insert_entries(db: Db, rows: Sequence[tuple[int, IndexEntry]]) -> None:
    """Inserts (stream id, entry) rows in one statement: a column array each, unnested."""
    await db.execute(
        f"INSERT INTO stream_index (stream_id, {_ENTRY}) SELECT * FROM unnest("
        "$1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[], "
        "$6::bigint[], $7::bigint[], $8::bigint[])",
        [sid for sid, _ in rows],
        [e.base_offset for _, e in rows],
        [e.last_offset for _, e in rows],
        [e.object_key for _, e in rows],
        [e.position for _, e in rows],
        [e.length for _, e in rows],
        [e.max_timestamp for _, e in rows],
        [e.append_ms for _, e in rows],
    )


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
