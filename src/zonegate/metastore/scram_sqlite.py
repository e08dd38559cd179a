"""SCRAM credentials in the SQLite store: `ScramStore` over the `scram_credentials` table."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from zonegate.metastore.models import ScramRecord
from zonegate.metastore.tables_sqlite import SqliteTables


class ScramTables(SqliteTables):
    async def scram_credentials(self) -> list[ScramRecord]:
        def fn(db: sqlite3.Connection) -> list[ScramRecord]:
            rows = db.execute(
                "SELECT user_name, mechanism, salt, stored_key, server_key, iterations "
                "FROM scram_credentials ORDER BY user_name, mechanism"
            )
            return [
                ScramRecord(str(u), str(m), bytes(salt), bytes(stored), bytes(server), int(i))
                for u, m, salt, stored, server, i in rows
            ]

        return await self._read(fn)

    async def alter_scram_credentials(
        self, upserts: Sequence[ScramRecord], deletions: Sequence[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        def fn(db: sqlite3.Connection) -> list[tuple[str, str]]:
            missing = []
            for user, mechanism in deletions:
                gone = db.execute(
                    "DELETE FROM scram_credentials WHERE user_name = ? AND mechanism = ?",
                    (user, mechanism),
                ).rowcount
                if not gone:
                    missing.append((user, mechanism))
            for r in upserts:
                db.execute(
                    "INSERT OR REPLACE INTO scram_credentials (user_name, mechanism, salt, "
                    "stored_key, server_key, iterations) VALUES (?, ?, ?, ?, ?, ?)",
                    (r.user, r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations),
                )
            return missing

        return await self._run(fn)
