"""Consumer groups and committed offsets in the PostgreSQL store: `GroupStore` (api.py),
statement by statement as groups_sqlite.py."""

from __future__ import annotations

from collections.abc import Sequence

from zonegate.metastore.groups_sqlite import _row
from zonegate.metastore.models import CommittedOffset, GroupRecord
from zonegate.metastore.tables_postgres import Db, PostgresTables
from zonegate.metastore.txns_postgres import next_offset_seq


class GroupTables(PostgresTables):
    async def load_group(self, group_id: str) -> GroupRecord | None:
        async def fn(db: Db) -> GroupRecord | None:
            row = await db.fetchrow(
                "SELECT group_id, group_type, state FROM groups WHERE group_id = $1", group_id
            )
            return GroupRecord(*row) if row else None

        return await self._read(fn)

    async def save_group(self, group: GroupRecord) -> None:
        await self._write1(
            "INSERT INTO groups (group_id, group_type, state) VALUES ($1, $2, $3) "
            "ON CONFLICT (group_id) DO UPDATE SET group_type = excluded.group_type, "
            "state = excluded.state",
            group.group_id,
            group.group_type,
            group.state,
        )

    async def delete_group(self, group_id: str) -> None:
        async def fn(db: Db) -> None:
            await db.execute("DELETE FROM groups WHERE group_id = $1", group_id)
            await db.execute("DELETE FROM group_offsets WHERE group_id = $1", group_id)
            await db.execute("DELETE FROM txn_pending_offsets WHERE group_id = $1", group_id)

        await self._tx(fn)

    async def list_groups(self) -> list[GroupRecord]:
        async def fn(db: Db) -> list[GroupRecord]:
            return [
                GroupRecord(*row)
                for row in await db.fetch(
                    "SELECT group_id, group_type, state FROM groups "
                    "UNION SELECT DISTINCT group_id, 'classic', '' FROM group_offsets "
                    "WHERE group_id NOT IN (SELECT group_id FROM groups) ORDER BY 1"
                )
            ]

        return await self._read(fn)

    async def commit_offsets(self, group_id: str, offsets: Sequence[CommittedOffset]) -> None:
        async def fn(db: Db) -> None:
            # Its place in the order of all commits (groups_sqlite.py says why).
            seq = await next_offset_seq(db)
            await db.executemany(
                "INSERT INTO group_offsets (group_id, topic, partition, committed_offset, "
                "leader_epoch, metadata, commit_ms, seq) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
                "ON CONFLICT (group_id, topic, partition) DO UPDATE SET "
                "committed_offset = excluded.committed_offset, "
                "leader_epoch = excluded.leader_epoch, metadata = excluded.metadata, "
                "commit_ms = excluded.commit_ms, seq = excluded.seq",
                [(group_id, *_row(o), seq) for o in offsets],
            )

        await self._tx(fn)

    async def fetch_offsets(self, group_id: str) -> list[CommittedOffset]:
        async def fn(db: Db) -> list[CommittedOffset]:
            return [
                CommittedOffset(*row)
                for row in await db.fetch(
                    "SELECT topic, partition, committed_offset, leader_epoch, metadata, "
                    "commit_ms FROM group_offsets WHERE group_id = $1 ORDER BY topic, partition",
                    group_id,
                )
            ]

        return await self._read(fn)

    async def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]) -> None:
        async def fn(db: Db) -> None:
            keys = [(group_id, t, p) for t, p in partitions]
            where = "WHERE group_id = $1 AND topic = $2 AND partition = $3"
            await db.executemany(f"DELETE FROM group_offsets {where}", keys)
            await db.executemany(f"DELETE FROM txn_pending_offsets {where}", keys)

        await self._tx(fn)
