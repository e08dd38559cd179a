"""Client quotas in the PostgreSQL store: `QuotaStore` over the `client_quotas` table."""

from __future__ import annotations

from collections.abc import Sequence

from zonegate.metastore.models import QuotaEntity, quota_entity_from_key, quota_entity_key
from zonegate.metastore.tables_postgres import Db, PostgresTables, put_values


class QuotaTables(PostgresTables):
    async def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        async def fn(db: Db) -> dict[QuotaEntity, dict[str, float]]:
            out: dict[QuotaEntity, dict[str, float]] = {}
            for r in await db.fetch("SELECT entity, name, value FROM client_quotas"):
                out.setdefault(quota_entity_from_key(str(r[0])), {})[str(r[1])] = float(r[2])
            return out

        return await self._read(fn)

    async def alter_client_quotas(
        self, changes: Sequence[tuple[QuotaEntity, dict[str, float | None]]]
    ) -> None:
        async def fn(db: Db) -> None:
            for entity, values in changes:
                await put_values(db, "client_quotas", "entity", quota_entity_key(entity), values)

        await self._tx(fn)
