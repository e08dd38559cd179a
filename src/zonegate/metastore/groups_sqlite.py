"""Consumer groups and committed offsets in the SQLite store: `GroupStore` (api.py) over
the tables of tables_sqlite.py."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from zonegate.metastore.models import CommittedOffset, GroupRecord
from zonegate.metastore.tables_sqlite import SqliteTables
from zonegate.metastore.txns_sqlite import next_offset_seq


class GroupTables(SqliteTables):
    async def load_group(self, group_id: str) -> GroupRecord | None:
        def fn(db: sqlite3.Connection) -> GroupRecord | None:
            row = db.execute(
                "SELECT group_id, group_type, state FROM groups WHERE group_id = ?", (group_id,)
            ).fetchone()
            return GroupRecord(*row) if row else None

        return await self._read(fn)

    async def save_group(self, group: GroupRecord) -> None:
        await self._run(
            lambda db: db.execute(
                "INSERT INTO groups (group_id, group_type, state) VALUES (?, ?, ?) "
                "ON CONFLICT(group_id) DO UPDATE SET group_type = excluded.group_type, "
                "state = excluded.state",
                (group.group_id, group.group_type, group.state),
            )
        )

    async def delete_group(self, group_id: str) -> None:
        def fn(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM groups WHERE group_id = ?", (group_id,))
            db.execute("DELETE FROM group_offsets WHERE group_id = ?", (group_id,))
            db.execute("DELETE FROM txn_pending_offsets WHERE group_id = ?", (group_id,))

        await self._run(fn)

    async def list_groups(self) -> list[GroupRecord]:
        return await self._read(
            lambda db: [
                GroupRecord(*row)
                for row in db.execute(
                    "SELECT group_id, group_type, state FROM groups "
                    "UNION SELECT DISTINCT group_id, 'classic', '' FROM group_offsets "
                    "WHERE group_id NOT IN (SELECT group_id FROM groups) ORDER BY 1"
                )
            ]
        )

    async def commit_offsets(self, group_id: str, offsets: Sequence[CommittedOffset]) -> None:
        def fn(db: sqlite3.Connection) -> None:
            # Its place in the order of all commits: a transaction's commit completed
            # later keeps this one if it came after the TxnOffsetCommit (txns_sqlite.py).
            seq = next_offset_seq(db)
            db.executemany(
                "INSERT INTO group_offsets (group_id, topic, partition, committed_offset, "
                "leader_epoch, metadata, commit_ms, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(group_id, topic, partition) DO UPDATE SET "
                "committed_offset = excluded.committed_offset, "
                "leader_epoch = excluded.leader_epoch, metadata = excluded.metadata, "
                "commit_ms = excluded.commit_ms, seq = excluded.seq",
                [(group_id, *_row(o), seq) for o in offsets],
            )

        await self._run(fn)

    async def fetch_offsets(self, group_id: str) -> list[CommittedOffset]:
        return await self._read(
            lambda db: [
                CommittedOffset(*row)
                for row in db.execute(
                    "SELECT topic, partition, committed_offset, leader_epoch, metadata, commit_ms "
                    "FROM group_offsets WHERE group_id = ? ORDER BY topic, partition",
                    (group_id,),
                )
            ]
        )

    async def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]) -> None:
        def fn(db: sqlite3.Connection) -> None:
            keys = [(group_id, t, p) for t, p in partitions]
            where = "WHERE group_id = ? AND topic = ? AND partition = ?"
            db.executemany(f"DELETE FROM group_offsets {where}", keys)
            # OffsetDelete drops an offset pending in a transaction too (Kafka's
            # OffsetMetadataManager): the transaction's commit then brings nothing back.
            db.executemany(f"DELETE FROM txn_pending_offsets {where}", keys)

        await self._run(fn)


def _row(o: CommittedOffset) -> tuple[str, int, int, int, str, int]:
    return (o.topic, o.partition, o.offset, o.leader_epoch, o.metadata, o.commit_ms)
