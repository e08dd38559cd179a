"""Transaction state in the PostgreSQL store: `TransactionStore` and `PendingOffsetStore`
(api.py), statement by statement as txns_sqlite.py.

A shard's writes read its epoch `FOR SHARE`: a takeover's `FOR UPDATE` of the same row
waits for them, and a write after a takeover sees the new epoch and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from zonegate.metastore.models import CommittedOffset, ShardFenced, ShardOwner
from zonegate.metastore.tables_postgres import Db, PostgresTables
from zonegate.metastore.txns_sqlite import (
    COMPLETE_COMMIT,
    COMPLETE_UPSERT,
    OFFSET_SEQ,
    PENDING_COLUMNS,
    TXN_COLUMNS,
    pending_rows,
    txn_metadata,
    txn_row,
)
from zonegate.transactions.metadata import TransactionMetadata, TxnTransit


async def next_offset_seq(db: Db) -> int:
    """The next place in the order of offset commits; the counter's row stays locked to
    the caller's commit, so places follow the order commits land in."""
    value: int = await db.fetchval(
        f"INSERT INTO counters (name, value) VALUES ('{OFFSET_SEQ}', 1) "
        "ON CONFLICT (name) DO UPDATE SET value = counters.value + 1 RETURNING value"
    )
    return value


async def _check_epoch(db: Db, shard: int, epoch: int) -> None:
    found = await db.fetchval("SELECT epoch FROM txn_shards WHERE shard = $1 FOR SHARE", shard)
    if found is None or found != epoch:
        raise ShardFenced(shard, epoch, None if found is None else int(found))


class TxnTables(PostgresTables):
    async def txn_shards(self) -> list[ShardOwner]:
        async def fn(db: Db) -> list[ShardOwner]:
            rows = await db.fetch(
                "SELECT shard, epoch, owner_node, owner_incarnation FROM txn_shards ORDER BY shard"
            )
            return [ShardOwner(*r) for r in rows]

        return await self._read(fn)

    async def shard_epoch(self, shard: int) -> int:
        async def fn(db: Db) -> int:
            found = await db.fetchval("SELECT epoch FROM txn_shards WHERE shard = $1", shard)
            return 0 if found is None else int(found)

        return await self._read(fn)

    async def take_shard(self, shard: int, node_id: int, incarnation: int, seen_epoch: int) -> int:
        async def fn(db: Db) -> int:
            # The row exists before it is locked, so two first takers queue on it.
            await db.execute(
                "INSERT INTO txn_shards (shard, epoch, owner_node, owner_incarnation) "
                "VALUES ($1, 0, -1, 0) ON CONFLICT (shard) DO NOTHING",
                shard,
            )
            current = int(
                await db.fetchval("SELECT epoch FROM txn_shards WHERE shard = $1 FOR UPDATE", shard)
            )
            if current != seen_epoch:
                raise ShardFenced(shard, seen_epoch, current)
            await db.execute(
                "UPDATE txn_shards SET epoch = $2, owner_node = $3, owner_incarnation = $4 "
                "WHERE shard = $1",
                shard,
                current + 1,
                node_id,
                incarnation,
            )
            return current + 1

        return await self._tx(fn)

    async def load_shard(self, shard: int) -> list[TransactionMetadata]:
        async def fn(db: Db) -> list[TransactionMetadata]:
            rows = await db.fetch(
                f"SELECT {TXN_COLUMNS} FROM transactions WHERE shard = $1 "
                "ORDER BY transactional_id",
                shard,
            )
            return [txn_metadata(tuple(r)) for r in rows]

        return await self._read(fn)

    async def write_txn(
        self, shard: int, epoch: int, transactional_id: str, transit: TxnTransit
    ) -> None:
        async def fn(db: Db) -> None:
            await _check_epoch(db, shard, epoch)
            columns = TXN_COLUMNS.split(", ")
            await db.execute(
                f"INSERT INTO transactions ({TXN_COLUMNS}) VALUES "
                f"({', '.join(f'${i + 1}' for i in range(len(columns)))}) "
                "ON CONFLICT (transactional_id) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in columns[1:]),
                *txn_row(shard, transactional_id, transit),
            )

        await self._tx(fn)

    async def delete_txn(self, shard: int, epoch: int, transactional_id: str) -> None:
        async def fn(db: Db) -> None:
            await _check_epoch(db, shard, epoch)
            await db.execute(
                "DELETE FROM transactions WHERE transactional_id = $1", transactional_id
            )

        await self._tx(fn)

    # -- offsets pending in transactions ------------------------------------------------

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        offsets_partition: int,
        offsets: Sequence[CommittedOffset],
    ) -> None:
        async def fn(db: Db) -> None:
            seq = await next_offset_seq(db)
            await db.executemany(
                f"INSERT INTO txn_pending_offsets ({PENDING_COLUMNS}) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
                "ON CONFLICT (group_id, producer_id, topic, partition) DO UPDATE SET "
                "offsets_partition = excluded.offsets_partition, "
                "committed_offset = excluded.committed_offset, "
                "leader_epoch = excluded.leader_epoch, metadata = excluded.metadata, "
                "commit_ms = excluded.commit_ms, seq = excluded.seq",
                pending_rows(group_id, producer_id, offsets_partition, offsets, seq),
            )

        await self._tx(fn)

    async def complete_txn_offsets(
        self, offsets_partition: int, producer_id: int, commit: bool
    ) -> None:
        async def fn(db: Db) -> None:
            where = "producer_id = $1 AND offsets_partition = $2"
            if commit:
                await db.execute(
                    COMPLETE_COMMIT + where + COMPLETE_UPSERT, producer_id, offsets_partition
                )
            await db.execute(
                f"DELETE FROM txn_pending_offsets WHERE {where}", producer_id, offsets_partition
            )

        await self._tx(fn)

    async def pending_offsets(self, group_id: str) -> list[tuple[str, int]]:
        async def fn(db: Db) -> list[tuple[str, int]]:
            rows = await db.fetch(
                "SELECT DISTINCT topic, partition FROM txn_pending_offsets "
                "WHERE group_id = $1 ORDER BY topic, partition",
                group_id,
            )
            return [(str(t), int(p)) for t, p in rows]

        return await self._read(fn)
