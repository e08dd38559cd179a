"""Fixtures every tier may use: one PostgreSQL server per test session, started on
first use (tests/postgres_server.py), each test taking fresh databases on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres_server import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as pg:
        yield pg
