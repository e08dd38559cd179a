"""Transaction state in the SQLite store: `TransactionStore` and `PendingOffsetStore` (api.py)
over `txn_shards`, `transactions` and `txn_pending_offsets` (docs/transactions.md).

Every write of a shard's state checks the shard's epoch in the same transaction, so a
node that lost the shard (another took it over, bumping the epoch) writes nothing. The
row codecs here are shared with txns_postgres.py.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from zonegate.metastore.models import CommittedOffset, ShardFenced, ShardOwner
from zonegate.metastore.tables_sqlite import SqliteTables
from zonegate.transactions.metadata import TransactionMetadata, TxnTransit
from zonegate.transactions.states import TransactionVersion, TxnState

TXN_COLUMNS = (
    "transactional_id, shard, producer_id, prev_producer_id, next_producer_id, "
    "producer_epoch, last_producer_epoch, timeout_ms, state, partitions, start_ms, "
    "last_update_ms, client_version"
)
PENDING_COLUMNS = (
    "group_id, producer_id, topic, partition, offsets_partition, committed_offset, "
    "leader_epoch, metadata, commit_ms, seq"
)
# The counter every offset commit, plain or transactional, takes its place from.
OFFSET_SEQ = "offset_seq"


def txn_row(shard: int, transactional_id: str, t: TxnTransit) -> tuple[object, ...]:
    """`TXN_COLUMNS`' values; the partitions as sorted JSON `[[topic, partition], ...]`."""
    parts = json.dumps(sorted([topic, partition] for topic, partition in t.partitions))
    return (
        transactional_id,
        shard,
        t.producer_id,
        t.prev_producer_id,
        t.next_producer_id,
        t.producer_epoch,
        t.last_producer_epoch,
        t.txn_timeout_ms,
        int(t.state),
        parts,
        t.txn_start_ms,
        t.txn_last_update_ms,
        int(t.client_version),
    )


def txn_metadata(r: Sequence[object]) -> TransactionMetadata:
    """A `TXN_COLUMNS` row back as the coordinator's metadata, nothing pending."""
    tid, _shard, pid, prev, nxt, epoch, last, timeout, state, parts, start, update, cv = r
    return TransactionMetadata(
        transactional_id=str(tid),
        producer_id=_int(pid),
        producer_epoch=_int(epoch),
        last_producer_epoch=_int(last),
        txn_timeout_ms=_int(timeout),
        state=TxnState(_int(state)),
        partitions={(str(t), int(p)) for t, p in json.loads(str(parts))},
        txn_start_ms=_int(start),
        txn_last_update_ms=_int(update),
        client_version=TransactionVersion(_int(cv)),
        prev_producer_id=_int(prev),
        next_producer_id=_int(nxt),
    )


def pending_rows(
    group_id: str, producer_id: int, offsets_partition: int, offsets: Sequence[CommittedOffset],
    seq: int,
) -> list[tuple[object, ...]]:  # fmt: skip
    return [
        (group_id, producer_id, o.topic, o.partition, offsets_partition, o.offset,
         o.leader_epoch, o.metadata, o.commit_ms, seq)
        for o in offsets
    ]  # fmt: skip


def _int(value: object) -> int:
    assert isinstance(value, int), value
    return value


def next_offset_seq(db: sqlite3.Connection) -> int:
    """The next place in the order of offset commits, taken in the caller's transaction."""
    db.execute(
        f"INSERT INTO counters (name, value) VALUES ('{OFFSET_SEQ}', 1) "
        "ON CONFLICT(name) DO UPDATE SET value = value + 1"
    )
    value: int = db.execute(f"SELECT value FROM counters WHERE name = '{OFFSET_SEQ}'").fetchone()[0]
    return value


def _check_epoch(db: sqlite3.Connection, shard: int, epoch: int) -> None:
    found = db.execute("SELECT epoch FROM txn_shards WHERE shard = ?", (shard,)).fetchone()
    if found is None or found[0] != epoch:
        raise ShardFenced(shard, epoch, None if found is None else int(found[0]))


class TxnTables(SqliteTables):
    async def txn_shards(self) -> list[ShardOwner]:
        return await self._read(
            lambda db: [
                ShardOwner(*r)
                for r in db.execute(
                    "SELECT shard, epoch, owner_node, owner_incarnation FROM txn_shards "
                    "ORDER BY shard"
                )
            ]
        )

    async def shard_epoch(self, shard: int) -> int:
        def fn(db: sqlite3.Connection) -> int:
            found = db.execute("SELECT epoch FROM txn_shards WHERE shard = ?", (shard,)).fetchone()
            return 0 if found is None else int(found[0])

        return await self._read(fn)

    async def take_shard(self, shard: int, node_id: int, incarnation: int, seen_epoch: int) -> int:
        def fn(db: sqlite3.Connection) -> int:
            found = db.execute("SELECT epoch FROM txn_shards WHERE shard = ?", (shard,)).fetchone()
            current = 0 if found is None else int(found[0])
            if current != seen_epoch:
                raise ShardFenced(shard, seen_epoch, current)
            db.execute(
                "INSERT INTO txn_shards (shard, epoch, owner_node, owner_incarnation) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(shard) DO UPDATE SET epoch = excluded.epoch, "
                "owner_node = excluded.owner_node, owner_incarnation = excluded.owner_incarnation",
                (shard, current + 1, node_id, incarnation),
            )
            return current + 1

        return await self._run(fn)

    async def load_shard(self, shard: int) -> list[TransactionMetadata]:
        return await self._read(
            lambda db: [
                txn_metadata(r)
                for r in db.execute(
                    f"SELECT {TXN_COLUMNS} FROM transactions WHERE shard = ? "
                    "ORDER BY transactional_id",
                    (shard,),
                )
            ]
        )

    async def write_txn(
        self, shard: int, epoch: int, transactional_id: str, transit: TxnTransit
    ) -> None:
        def fn(db: sqlite3.Connection) -> None:
            _check_epoch(db, shard, epoch)
            db.execute(
                f"INSERT OR REPLACE INTO transactions ({TXN_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                txn_row(shard, transactional_id, transit),
            )

        await self._run(fn)

    async def delete_txn(self, shard: int, epoch: int, transactional_id: str) -> None:
        def fn(db: sqlite3.Connection) -> None:
            _check_epoch(db, shard, epoch)
            db.execute("DELETE FROM transactions WHERE transactional_id = ?", (transactional_id,))

        await self._run(fn)

    # -- offsets pending in transactions ------------------------------------------------

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        offsets_partition: int,
        offsets: Sequence[CommittedOffset],
    ) -> None:
        def fn(db: sqlite3.Connection) -> None:
            seq = next_offset_seq(db)
            db.executemany(
                f"INSERT OR REPLACE INTO txn_pending_offsets ({PENDING_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                pending_rows(group_id, producer_id, offsets_partition, offsets, seq),
            )

        await self._run(fn)

    async def complete_txn_offsets(
        self, offsets_partition: int, producer_id: int, commit: bool
    ) -> None:
        def fn(db: sqlite3.Connection) -> None:
            where = "producer_id = ? AND offsets_partition = ?"
            if commit:
                db.execute(
                    COMPLETE_COMMIT + where + COMPLETE_UPSERT, (producer_id, offsets_partition)
                )
            db.execute(
                f"DELETE FROM txn_pending_offsets WHERE {where}", (producer_id, offsets_partition)
            )

        await self._run(fn)

    async def pending_offsets(self, group_id: str) -> list[tuple[str, int]]:
        return await self._read(
            lambda db: [
                (str(t), int(p))
                for t, p in db.execute(
                    "SELECT DISTINCT topic, partition FROM txn_pending_offsets "
                    "WHERE group_id = ? ORDER BY topic, partition",
                    (group_id,),
                )
            ]
        )


# A transaction's commit at one offsets partition: its pending rows become the group's,
# each unless the committed one is later in the order of commits (a plain OffsetCommit
# after the TxnOffsetCommit). The backends' placeholders go between the two halves.
COMPLETE_COMMIT = (
    "INSERT INTO group_offsets (group_id, topic, partition, committed_offset, leader_epoch, "
    "metadata, commit_ms, seq) SELECT group_id, topic, partition, committed_offset, "
    "leader_epoch, metadata, commit_ms, seq FROM txn_pending_offsets WHERE "
)
COMPLETE_UPSERT = (
    " ON CONFLICT (group_id, topic, partition) DO UPDATE SET "
    "committed_offset = excluded.committed_offset, leader_epoch = excluded.leader_epoch, "
    "metadata = excluded.metadata, commit_ms = excluded.commit_ms, seq = excluded.seq "
    "WHERE excluded.seq > group_offsets.seq"
)
