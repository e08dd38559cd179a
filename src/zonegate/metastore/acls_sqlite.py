"""ACLs in the SQLite store: `AclStore` over the `acls` table and its version counter."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from zonegate.metastore.models import (
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from zonegate.metastore.tables_sqlite import SqliteTables

_COLUMNS = "resource_type, resource_name, pattern_type, principal, host, operation, permission"
_WHERE = (
    "resource_type = ? AND resource_name = ? AND pattern_type = ? AND principal = ? "
    "AND host = ? AND operation = ? AND permission = ?"
)


def row(acl: AclBinding) -> tuple[object, ...]:
    return (
        int(acl.resource_type),
        acl.resource_name,
        int(acl.pattern_type),
        acl.principal,
        acl.host,
        int(acl.operation),
        int(acl.permission),
    )


def binding(r: Sequence[object]) -> AclBinding:
    rt, name, pt, principal, host, op, perm = r
    return AclBinding(
        ResourceType(int(str(rt))),
        str(name),
        PatternType(int(str(pt))),
        str(principal),
        str(host),
        AclOperation(int(str(op))),
        AclPermission(int(str(perm))),
    )


def _bump(db: sqlite3.Connection) -> None:
    db.execute(
        "INSERT INTO counters (name, value) VALUES ('acl_version', 1) "
        "ON CONFLICT (name) DO UPDATE SET value = value + 1"
    )


class AclTables(SqliteTables):
    async def acl_version(self) -> int:
        def fn(db: sqlite3.Connection) -> int:
            found = db.execute("SELECT value FROM counters WHERE name = 'acl_version'").fetchone()
            return int(found[0]) if found else 0

        return await self._read(fn)

    async def acls(self) -> tuple[int, list[AclBinding]]:
        def fn(db: sqlite3.Connection) -> tuple[int, list[AclBinding]]:
            found = db.execute("SELECT value FROM counters WHERE name = 'acl_version'").fetchone()
            rows = db.execute(f"SELECT {_COLUMNS} FROM acls ORDER BY {_COLUMNS}")
            return (int(found[0]) if found else 0), [binding(r) for r in rows]

        return await self._read(fn)

    async def create_acls(self, acls: Sequence[AclBinding]) -> None:
        def fn(db: sqlite3.Connection) -> None:
            db.executemany(
                f"INSERT OR IGNORE INTO acls ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [row(a) for a in acls],
            )
            _bump(db)

        await self._run(fn)

    async def delete_acls(self, acls: Sequence[AclBinding]) -> list[AclBinding]:
        def fn(db: sqlite3.Connection) -> list[AclBinding]:
            gone = [
                a for a in acls if db.execute(f"DELETE FROM acls WHERE {_WHERE}", row(a)).rowcount
            ]
            if gone:
                _bump(db)
            return gone

        return await self._run(fn)
