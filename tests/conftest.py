"""Fixtures every tier may use, each started once per test session on first use and
always stopped: one PostgreSQL server (tests/postgres_server.py), each test taking
fresh databases on it; one real Apache Kafka broker (tests/apache_kafka.py), the
oracle for differential tests and the peer for benchmarks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.apache_kafka import ApacheKafkaBroker
from tests.postgres_server import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as pg:
        yield pg


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaBroker]:
    broker = ApacheKafkaBroker(tmp_path_factory.mktemp("apache-kafka"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
