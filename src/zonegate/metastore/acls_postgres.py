"""ACLs in the PostgreSQL store: `AclStore` over the `acls` table and its version counter."""

from __future__ import annotations

from collections.abc import Sequence

from zonegate.metastore.acls_sqlite import binding, row
from zonegate.metastore.models import AclBinding
from zonegate.metastore.tables_postgres import Db, PostgresTables, changed_rows

_COLUMNS = "resource_type, resource_name, pattern_type, principal, host, operation, permission"
_WHERE = (
    "resource_type = $1 AND resource_name = $2 AND pattern_type = $3 AND principal = $4 "
    "AND host = $5 AND operation = $6 AND permission = $7"
)


async def _bump(db: Db) -> None:
    await db.execute(
        "INSERT INTO counters (name, value) VALUES ('acl_version', 1) "
        "ON CONFLICT (name) DO UPDATE SET value = counters.value + 1"
    )


class AclTables(PostgresTables):
    async def acl_version(self) -> int:
        async def fn(db: Db) -> int:
            found = await db.fetchval("SELECT value FROM counters WHERE name = 'acl_version'")
            return int(found) if found is not None else 0

        return await self._read(fn)

    async def acls(self) -> tuple[int, list[AclBinding]]:
        async def fn(db: Db) -> tuple[int, list[AclBinding]]:
            found = await db.fetchval("SELECT value FROM counters WHERE name = 'acl_version'")
            rows = await db.fetch(f"SELECT {_COLUMNS} FROM acls ORDER BY {_COLUMNS}")
            return (int(found) if found is not None else 0), [binding(tuple(r)) for r in rows]

        return await self._read(fn)

    async def create_acls(self, acls: Sequence[AclBinding]) -> None:
        async def fn(db: Db) -> None:
            for a in acls:
                await db.execute(
                    f"INSERT INTO acls ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7) "
                    "ON CONFLICT DO NOTHING",
                    *row(a),
                )
            await _bump(db)

        await self._tx(fn)

    async def delete_acls(self, acls: Sequence[AclBinding]) -> list[AclBinding]:
        async def fn(db: Db) -> list[AclBinding]:
            gone = []
            for a in acls:
                if changed_rows(await db.execute(f"DELETE FROM acls WHERE {_WHERE}", *row(a))):
                    gone.append(a)
            if gone:
                await _bump(db)
            return gone

        return await self._tx(fn)
