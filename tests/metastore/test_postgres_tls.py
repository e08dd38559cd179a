"""The PostgreSQL metadata store over TLS: the URL's `sslmode=verify-full` and
`sslrootcert` (libpq's names, which asyncpg honours) against a server started with
ssl=on and a certificate of a test CA (trustme). Every connection of the store is
encrypted; a CA that did not sign the server's certificate is refused in one line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest
import trustme

from tests.postgres_server import PostgresServer
from zonegate.metastore.api import open_metastore
from zonegate.metastore.models import MetaStoreUnavailable

pytestmark = pytest.mark.integration


def test_postgres_over_tls_with_verify_full(tmp_path: Path) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with PostgresServer(ca=trustme.CA()) as pg:
        url = pg.new_database()
        database = url.rsplit("/", 1)[1]

        async def run() -> None:
            store = open_metastore(f"{url}?sslmode=verify-full&sslrootcert={pg.ca_file}")
            admin = await asyncpg.connect(pg.admin_url)
            try:
                token = await store.cluster_secret("rpc-token")
                assert len(token) == 64
                rows = await admin.fetch(
                    "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                    "WHERE a.datname = $1",
                    database,
                )
                assert rows and all(r["ssl"] for r in rows), "every connection of the store"
            finally:
                await store.close()
                await admin.close()
            for query, why in (
                (f"sslmode=verify-full&sslrootcert={other}", "its TLS certificate is not trusted"),
                ("sslmode=verify-full&sslrootcert=/nonexistent/ca.pem", "(sslrootcert, "),
            ):
                wrong = open_metastore(f"{url}?{query}")
                try:
                    with pytest.raises(MetaStoreUnavailable) as refused:
                        await wrong.cluster_secret("rpc-token")
                finally:
                    await wrong.close()
                message = str(refused.value)
                assert why in message and "\n" not in message, message

        asyncio.run(run())
