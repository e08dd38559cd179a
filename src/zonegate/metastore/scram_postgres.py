"""SCRAM credentials in the PostgreSQL store: `ScramStore` over the `scram_credentials`
table."""

from __future__ import annotations

from collections.abc import Sequence

from zonegate.metastore.models import ScramRecord
from zonegate.metastore.tables_postgres import Db, PostgresTables, changed_rows


class ScramTables(PostgresTables):
    async def scram_credentials(self) -> list[ScramRecord]:
        async def fn(db: Db) -> list[ScramRecord]:
            rows = await db.fetch(
                "SELECT user_name, mechanism, salt, stored_key, server_key, iterations "
                "FROM scram_credentials ORDER BY user_name, mechanism"
            )
            return [
                ScramRecord(str(r[0]), str(r[1]), bytes(r[2]), bytes(r[3]), bytes(r[4]), int(r[5]))
                for r in rows
            ]

        return await self._read(fn)

    async def alter_scram_credentials(
        self, upserts: Sequence[ScramRecord], deletions: Sequence[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        async def fn(db: Db) -> list[tuple[str, str]]:
            missing = []
            for user, mechanism in deletions:
                status = await db.execute(
                    "DELETE FROM scram_credentials WHERE user_name = $1 AND mechanism = $2",
                    user,
                    mechanism,
                )
                if not changed_rows(status):
                    missing.append((user, mechanism))
            for r in upserts:
                await db.execute(
                    "INSERT INTO scram_credentials (user_name, mechanism, salt, stored_key, "
                    "server_key, iterations) VALUES ($1, $2, $3, $4, $5, $6) "
                    "ON CONFLICT (user_name, mechanism) DO UPDATE SET salt = excluded.salt, "
                    "stored_key = excluded.stored_key, server_key = excluded.server_key, "
                    "iterations = excluded.iterations",
                    r.user,
                    r.mechanism,
                    r.salt,
                    r.stored_key,
                    r.server_key,
                    r.iterations,
                )
            return missing

        return await self._tx(fn)
