"""Object GC's questions to the SQLite store: `GcStore` (maintenance/gc.py) over the index and
the `gc_pending` table of tables_sqlite.py."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from zonegate.metastore.tables_sqlite import SqliteTables


class GcTables(SqliteTables):
    async def referenced_units(self, units: Mapping[str, tuple[str, str] | None]) -> set[str]:
        # A unit of one object has no members: the empty range [unit, unit).
        asked = [(unit, *(members or (unit, unit))) for unit, members in units.items()]

        def fn(db: sqlite3.Connection) -> set[str]:
            named: set[str] = set()
            # A unit is named by an entry with its key, or with a key in its members'
            # range (the object store's `DeletionUnit`): lookups on the object_key
            # index, whose BINARY order is the range's code-point order.
            for unit, first, end in asked:
                row = db.execute(
                    "SELECT 1 FROM stream_index WHERE object_key = ? "
                    "OR (object_key >= ? AND object_key < ?) LIMIT 1",
                    (unit, first, end),
                ).fetchone()
                if row is not None:
                    named.add(unit)
            return named

        return await self._read(fn)

    async def gc_pending(self) -> dict[str, tuple[int, int]]:
        return await self._read(
            lambda db: {
                unit: (int(seen), int(size))
                for unit, seen, size in db.execute(
                    "SELECT unit, first_seen_ms, size FROM gc_pending"
                )
            }
        )

    async def update_gc_pending(
        self, add: dict[str, tuple[int, int]], remove: Iterable[str]
    ) -> None:
        gone = list(remove)

        def fn(db: sqlite3.Connection) -> None:
            db.executemany(
                "INSERT OR IGNORE INTO gc_pending (unit, first_seen_ms, size) VALUES (?, ?, ?)",
                [(u, seen, size) for u, (seen, size) in add.items()],
            )
            db.executemany("DELETE FROM gc_pending WHERE unit = ?", [(u,) for u in gone])

        await self._run(fn)
