"""Object GC's questions to the PostgreSQL store: `GcStore` (maintenance/gc.py), statement by
statement as gc_sqlite.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from zonegate.metastore.tables_postgres import Db, PostgresTables


class GcTables(PostgresTables):
    async def referenced_units(self, units: Mapping[str, tuple[str, str] | None]) -> set[str]:
        # A unit of one object has no members: the empty range [unit, unit).
        ranges = [members or (unit, unit) for unit, members in units.items()]

        async def fn(db: Db) -> set[str]:
            # A unit is named by an entry with its key, or with a key in its members'
            # range (the object store's `DeletionUnit`), in code-point order: the
            # object_key index in byte order (COLLATE "C").
            rows = await db.fetch(
                "SELECT u FROM unnest($1::text[], $2::text[], $3::text[]) AS t(u, lo, hi) "
                'WHERE EXISTS (SELECT 1 FROM stream_index WHERE object_key = u COLLATE "C" '
                'OR (object_key >= lo COLLATE "C" AND object_key < hi COLLATE "C"))',
                list(units),
                [first for first, _ in ranges],
                [end for _, end in ranges],
            )
            return {str(r[0]) for r in rows}

        return await self._read(fn)

    async def gc_pending(self) -> dict[str, tuple[int, int]]:
        async def fn(db: Db) -> dict[str, tuple[int, int]]:
            rows = await db.fetch("SELECT unit, first_seen_ms, size FROM gc_pending")
            return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

        return await self._read(fn)

    async def update_gc_pending(
        self, add: dict[str, tuple[int, int]], remove: Iterable[str]
    ) -> None:
        gone = list(remove)

        async def fn(db: Db) -> None:
            if add:
                await db.execute(
                    "INSERT INTO gc_pending (unit, first_seen_ms, size) SELECT * FROM "
                    "unnest($1::text[], $2::bigint[], $3::bigint[]) ON CONFLICT DO NOTHING",
                    list(add),
                    [seen for seen, _ in add.values()],
                    [size for _, size in add.values()],
                )
            if gone:
                await db.execute("DELETE FROM gc_pending WHERE unit = ANY($1::text[])", gone)

        await self._tx(fn)
