"""The S3 object store over HTTPS with a private CA: moto's S3 server serves a certificate
of a test CA (trustme); the store given that CA's bundle reads and writes, and one given
another CA (or none, the system's) is refused with the certificate error named."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.s3_server import FAKE_AWS_ENV, MotoS3Server
from zonegate.storage.objects import TransientObjectStoreError
from zonegate.storage.store_url import open_object_store

pytestmark = pytest.mark.integration


@pytest.fixture
def https_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3Server]:
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("ZONEGATE_S3_ENDPOINT", "AWS_ENDPOINT_URL", "AWS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ZONEGATE_S3_CA_BUNDLE", raising=False)
    with MotoS3Server(ca=trustme.CA()) as server:
        yield server


def test_s3_over_https_with_a_ca_bundle(https_s3: MotoS3Server, tmp_path: Path) -> None:
    assert https_s3.endpoint_url.startswith("https://") and https_s3.ca_file is not None
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))

    async def run() -> None:
        url = "s3://zonegate-test/tls"
        store = open_object_store(
            url, endpoint_url=https_s3.endpoint_url, ca_bundle=https_s3.ca_file
        )
        try:
            await store.put("wal/1", b"over TLS")
            assert await store.get_range("wal/1", 0, 8) == b"over TLS"
        finally:
            await store.close()
        for bundle in (str(other), None):  # another CA's, the system's
            store = open_object_store(
                url, endpoint_url=https_s3.endpoint_url, ca_bundle=bundle, retries=1
            )
            try:
                refusal = "CERTIFICATE_VERIFY_FAILED"
                with pytest.raises(TransientObjectStoreError, match=refusal) as refused:
                    await store.put("wal/2", b"refused")
                assert "\n" not in str(refused.value), "one line"
            finally:
                await store.close()

    asyncio.run(run())
    assert [
        o["Key"] for o in https_s3.client().list_objects_v2(Bucket="zonegate-test")["Contents"]
    ] == ["tls/wal/1"]
