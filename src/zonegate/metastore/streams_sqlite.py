"""Partitions' streams in the SQLite store: `StreamStore` (storage/index.py) over the
tables of tables_sqlite.py: partition state, index entries, producer state, the
aborted-transaction index and the leader-epoch history."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from zonegate.metastore.tables_sqlite import SqliteTables
from zonegate.storage.index import (
    INDEX_ENTRY_FIELDS,
    IndexEntry,
    LeaderEpochFenced,
    PartitionCommit,
    PartitionState,
    ProducerBatch,
    ProducerEntry,
    UnknownStream,
    entry_values,
)
from zonegate.transactions.partition_txns import AbortedTxn


class StreamTables(SqliteTables):
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
                    pid,
                    epoch,
                    tuple(ProducerBatch(*b) for b in json.loads(batches)),
                    coordinator_epoch,
                    txn_first_offset,
                )
                for pid, epoch, batches, coordinator_epoch, txn_first_offset in db.execute(
                    f"SELECT {_PRODUCER} FROM producer_state WHERE stream_id = ?", (stream_id,)
                )
            }
            aborted = tuple(
                AbortedTxn(*r)
                for r in db.execute(
                    f"SELECT {_ABORTED} FROM aborted_txns WHERE stream_id = ? "
                    "AND last_offset >= ? ORDER BY last_offset",
                    (stream_id, row[1]),
                )
            )
            return PartitionState(stream_id, row[0], row[1], row[2], producers, aborted)

        return await self._read(fn)

    async def read_index(self, stream_id: int) -> list[IndexEntry]:
        return await self._read(
            lambda db: [
                IndexEntry(*r)
                for r in db.execute(
                    "SELECT base_offset, last_offset, object_key, position, length, "
                    "max_timestamp, append_ms FROM stream_index WHERE stream_id = ? "
                    "ORDER BY base_offset",
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
        # runs on every produce's path (on the loop's thread, see sqlite.py).
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
                _INSERT_ENTRY, [(c.stream_id, *entry_values(e)) for c in live for e in c.entries]
            )
            db.executemany(
                "INSERT OR REPLACE INTO producer_state "
                "(stream_id, producer_id, epoch, batches, coordinator_epoch, txn_first_offset) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        c.stream_id,
                        p.producer_id,
                        p.epoch,
                        _batches_json(p.batches),
                        p.coordinator_epoch,
                        p.txn_first_offset,
                    )
                    for c in live
                    for p in c.producers
                ],  # fmt: skip
            )
            aborted = [(c.stream_id, *aborted_values(a)) for c in live for a in c.aborted]
            if aborted:
                db.executemany(_INSERT_ABORTED, aborted)
            return fenced

        return await self._run_on_loop(fn)

    async def read_entries(
        self, stream_id: int, offset: int, *, to_offset: int | None = None, limit: int = 500
    ) -> list[IndexEntry]:
        upper = _MAX_OFFSET if to_offset is None else to_offset
        return await self._read(
            lambda db: [
                IndexEntry(*r)
                for r in db.execute(
                    f"SELECT {_ENTRY} FROM stream_index WHERE stream_id = ? AND base_offset >= "
                    "(SELECT COALESCE(MAX(base_offset), ?) FROM stream_index "
                    "WHERE stream_id = ? AND base_offset <= ?) "
                    "AND last_offset >= ? AND base_offset <= ? ORDER BY base_offset LIMIT ?",
                    (stream_id, offset, stream_id, offset, offset, upper, limit),
                )
            ]
        )

    async def entries_at_time(
        self, stream_id: int, timestamp: int, from_offset: int, to_offset: int, limit: int = 4
    ) -> list[IndexEntry]:
        return await self._read(
            lambda db: [
                IndexEntry(*r)
                for r in db.execute(
                    f"SELECT {_ENTRY} FROM stream_index WHERE stream_id = ? AND base_offset "
                    "BETWEEN ? AND ? AND max_timestamp >= ? ORDER BY base_offset LIMIT ?",
                    (stream_id, from_offset, to_offset, timestamp, limit),
                )
            ]
        )

    async def newest_entry(
        self, stream_id: int, from_offset: int, to_offset: int
    ) -> IndexEntry | None:
        def fn(db: sqlite3.Connection) -> IndexEntry | None:
            row = db.execute(
                f"SELECT {_ENTRY} FROM stream_index WHERE stream_id = ? AND base_offset "
                "BETWEEN ? AND ? ORDER BY max_timestamp DESC, base_offset LIMIT 1",
                (stream_id, from_offset, to_offset),
            ).fetchone()
            return None if row is None else IndexEntry(*row)

        return await self._read(fn)

    async def replace_entries(
        self,
        stream_id: int,
        leader_epoch: int,
        old: Sequence[IndexEntry],
        new: Sequence[IndexEntry],
        *,
        drop_aborted: Sequence[int] = (),
    ) -> bool:
        def fn(db: sqlite3.Connection) -> bool:
            start = _fenced_log_start(db, stream_id, leader_epoch)
            have = set(
                db.execute(
                    "SELECT base_offset, object_key FROM stream_index WHERE stream_id = ? "
                    "AND base_offset BETWEEN ? AND ?",
                    (stream_id, min(e.base_offset for e in old), max(e.base_offset for e in old)),
                ).fetchall()
            )
            if not {(e.base_offset, e.object_key) for e in old} <= have:
                return False
            db.executemany(
                "DELETE FROM stream_index WHERE stream_id = ? AND base_offset = ?",
                [(stream_id, e.base_offset) for e in old],
            )
            db.executemany(
                _INSERT_ENTRY,
                [(stream_id, *entry_values(e)) for e in new if e.last_offset >= start],
            )
            db.executemany(
                "DELETE FROM aborted_txns WHERE stream_id = ? AND last_offset = ?",
                [(stream_id, m) for m in drop_aborted],
            )
            return True

        if not old:
            raise ValueError("nothing to replace")
        return await self._run(fn)

    async def truncate_head(self, stream_id: int, leader_epoch: int, log_start: int) -> int:
        def fn(db: sqlite3.Connection) -> int:
            start = max(_fenced_log_start(db, stream_id, leader_epoch), log_start)
            db.execute(
                "UPDATE partitions SET log_start_offset = ? WHERE stream_id = ?",
                (start, stream_id),
            )
            db.execute(
                "DELETE FROM stream_index WHERE stream_id = ? AND last_offset < ?",
                (stream_id, start),
            )
            # Kafka keeps an aborted transaction while its marker is in the log.
            db.execute(
                "DELETE FROM aborted_txns WHERE stream_id = ? AND last_offset < ?",
                (stream_id, start),
            )
            return start

        return await self._run(fn)


_MAX_OFFSET = (1 << 63) - 1
_ENTRY = ", ".join(INDEX_ENTRY_FIELDS)
_INSERT_ENTRY = f"INSERT INTO stream_index (stream_id, {_ENTRY}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_PRODUCER = "producer_id, epoch, batches, coordinator_epoch, txn_first_offset"
_ABORTED = "producer_id, first_offset, last_offset, last_stable_offset"
_INSERT_ABORTED = f"INSERT INTO aborted_txns (stream_id, {_ABORTED}) VALUES (?, ?, ?, ?, ?)"


def aborted_values(a: AbortedTxn) -> tuple[int, int, int, int]:
    return (a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)


def _fenced_log_start(db: sqlite3.Connection, stream_id: int, leader_epoch: int) -> int:
    """The partition's log start offset; UnknownStream or LeaderEpochFenced first."""
    row = db.execute(
        "SELECT leader_epoch, log_start_offset FROM partitions "
        "JOIN topics USING (topic_id) WHERE stream_id = ? AND deleted = 0",
        (stream_id,),
    ).fetchone()
    if row is None:
        raise UnknownStream(stream_id)
    if row[0] != leader_epoch:
        raise LeaderEpochFenced(stream_id, leader_epoch, row[0])
    return int(row[1])


def _batches_json(batches: Sequence[ProducerBatch]) -> str:
    """The JSON list of [first_seq, last_seq, base_offset, last_offset] lists, written
    without json.dumps (a measurable part of each commit); load_partition reads it."""
    return (
        "["
        + ",".join(f"[{b.first_seq},{b.last_seq},{b.base_offset},{b.last_offset}]" for b in batches)
        + "]"
    )
