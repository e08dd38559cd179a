"""The metadata-store backends the contract suite runs, and a case's connections to one.

`BACKENDS` maps a backend's name to a function that makes a fresh, empty store
for the case (a file under its tmp_path, a new database on the session's
PostgreSQL server) and returns its opener. Each call of the opener is one
more process-level connection to that same store (what one node process holds),
so a case can play two nodes, or reopen the store after closing it. Adding a
backend is one entry here; every case then runs on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.postgres_server import PostgresServer
from zonegate.metastore.api import MetaStore, open_metastore

Opener = Callable[[], MetaStore]


def make_sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    url = f"sqlite://{tmp_path / 'meta.db'}"  # an absolute path: sqlite:///tmp/...
    return lambda: open_metastore(url)


def make_postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.new_database()
    return lambda: open_metastore(url)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Opener]] = {
    "sqlite": make_sqlite,
    "postgresql": make_postgresql,
}


class Stores:
    """A case's connections to its one fresh store; those still open are closed after it."""

    def __init__(self, opener: Opener) -> None:
        self._opener = opener
        self._open: list[MetaStore] = []

    def open(self) -> MetaStore:
        store = self._opener()
        self._open.append(store)
        return store

    async def close(self, store: MetaStore) -> None:
        self._open.remove(store)
        await store.close()

    async def close_all(self) -> None:
        while self._open:
            await self._open.pop().close()
