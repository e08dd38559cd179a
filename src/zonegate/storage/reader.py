"""Reads stored batches by index entry: log cache first, then ranged GETs.

Adjacent entries of one object are merged into one ranged GET, so a catch-up
reader pays one request per object rather than one per batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from zonegate.metastore.models import IndexEntry
from zonegate.storage.log_cache import LogCache
from zonegate.wal_s3.object_store import ObjectStore


class StreamReader:
    def __init__(self, store: ObjectStore, log_cache: LogCache) -> None:
        self._store = store
        self._cache = log_cache

    async def read(self, entries: Sequence[IndexEntry]) -> list[bytes]:
        """The bytes of each entry, in order."""
        out: list[bytes | None] = [None] * len(entries)
        runs: list[tuple[str, int, int, list[int]]] = []  # key, start, end, entry indexes
        for i, e in enumerate(entries):
            cached = self._cache.get(e.object_key)
            if cached is not None:
                out[i] = cached[e.position : e.position + e.length]
                continue
            if runs and runs[-1][0] == e.object_key and runs[-1][2] == e.position:
                key, start, _, idx = runs[-1]
                runs[-1] = (key, start, e.position + e.length, [*idx, i])
            else:
                runs.append((e.object_key, e.position, e.position + e.length, [i]))
        if runs:
            blobs = await asyncio.gather(
                *(self._store.get_range(key, start, end - start) for key, start, end, _ in runs)
            )
            for (_, start, _, idx), blob in zip(runs, blobs, strict=True):
                for i in idx:
                    e = entries[i]
                    out[i] = blob[e.position - start : e.position - start + e.length]
        return [b for b in out if b is not None]
