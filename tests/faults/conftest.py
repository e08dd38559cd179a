"""One proxied cluster (tests/faults/cluster.py) per test run, shared by every
network-fault scenario: each starts from every proxy healed and every node up."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.cluster import ProxiedCluster
from tests.postgres_server import PostgresServer
from tests.s3_server import MotoS3Server
from tests.toxiproxy_server import ToxiproxyServer


@pytest.fixture(scope="session")
def proxied_cluster(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer
) -> Iterator[ProxiedCluster]:
    root = tmp_path_factory.mktemp("faults")
    with MotoS3Server() as s3, ToxiproxyServer(root / "toxiproxy.log") as toxi:
        cluster = ProxiedCluster(root, toxi, postgres_server.new_database(), s3.endpoint_url)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def healed(proxied_cluster: ProxiedCluster) -> ProxiedCluster:
    """The shared cluster with every toxic removed and every node running and ready."""
    proxied_cluster.heal()
    return proxied_cluster
