"""Client quotas in the SQLite store: `QuotaStore` over the `client_quotas` table."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from zonegate.metastore.models import QuotaEntity, quota_entity_from_key, quota_entity_key
from zonegate.metastore.tables_sqlite import SqliteTables, put_values


class QuotaTables(SqliteTables):
    async def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        def fn(db: sqlite3.Connection) -> dict[QuotaEntity, dict[str, float]]:
            out: dict[QuotaEntity, dict[str, float]] = {}
            for key, name, value in db.execute("SELECT entity, name, value FROM client_quotas"):
                out.setdefault(quota_entity_from_key(key), {})[name] = float(value)
            return out

        return await self._read(fn)

    async def alter_client_quotas(
        self, changes: Sequence[tuple[QuotaEntity, dict[str, float | None]]]
    ) -> None:
        def fn(db: sqlite3.Connection) -> None:
            for entity, values in changes:
                put_values(db, "client_quotas", "entity", quota_entity_key(entity), values)

        await self._run(fn)
