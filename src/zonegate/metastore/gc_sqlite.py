"""Object GC's questions to the SQLite store: `GcStore` (storage/gc.py) over the index and
the `gc_pending` table of tables_sqlite.py."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from zonegate.metastore.tables_sqlite import SqliteTables

_CHUNK = 400  # units asked about per statement, each a few bound parameters


class GcTables(SqliteTables):
    async def referenced_units(self, units: Sequence[str]) -> set[str]:
        def fn(db: sqlite3.Connection) -> set[str]:
            named: set[str] = set()
            for i in range(0, len(units), _CHUNK):
                chunk = units[i : i + _CHUNK]
                # A unit is named by an entry with its key, or (a pack file) by one with
                # a key of its objects: `<pack>@<offset>+<length>`, the range [pack@, packA)
                # of the object_key index ('A' follows '@').
                for unit in chunk:
                    row = db.execute(
                        "SELECT 1 FROM stream_index WHERE object_key = ? "
                        "OR (object_key >= ? AND object_key < ?) LIMIT 1",
                        (unit, unit + "@", unit + "A"),
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
