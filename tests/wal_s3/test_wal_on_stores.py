"""The writer on real backends: what it uploads can be found, described and read back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.storage.fakes import run
from zonegate.runtime.clock import SYSTEM_CLOCK, ManualClock
from zonegate.storage.instrumented import InstrumentedObjectStore
from zonegate.storage.store_url import open_object_store
from zonegate.wal_s3.wal_format import read_footer_from_store
from zonegate.wal_s3.wal_writer import WalWriter


async def _write_list_and_read_back(
    store: InstrumentedObjectStore, seal_age_s: float, clock: ManualClock | None = None
) -> None:
    writer = WalWriter(
        store, node_id=2, seal_bytes=4096, seal_age_s=seal_age_s, clock=clock or SYSTEM_CLOCK
    )
    payloads = [(i % 3, bytes([i % 256]) * (100 + 37 * i)) for i in range(60)]
    staged = [writer.append(s, p) for s, p in payloads]
    if clock is not None:
        await clock.advance(seal_age_s)  # the last object is sealed by age
    locs = await asyncio.gather(*staged)
    await writer.close()

    # Recovery's view: LIST the node's objects, read each footer from its tail.
    infos = await store.list("wal/2/")
    assert {i.key for i in infos} == {loc.object_key for loc in locs}
    assert len(infos) > 1  # several objects were sealed by size
    described = []
    for info in infos:
        footer = await read_footer_from_store(store, info.key, size=info.size)
        assert footer.node_id == 2
        described += [(info.key, e.stream_id, e.position, e.length) for e in footer.entries]
    assert sorted(described) == sorted(
        (loc.object_key, loc.stream_id, loc.position, loc.length) for loc in locs
    )
    # The fetch path's view: a ranged GET of each location gives the batch back.
    for (_, payload), loc in zip(payloads, locs, strict=True):
        assert await store.get_range(loc.object_key, loc.position, loc.length) == payload
    await store.close()


@pytest.mark.integration
def test_writer_on_s3_produces_objects_recovery_and_fetch_can_read(
    s3_endpoint: str, s3_bucket: str
) -> None:
    store = open_object_store(f"s3://{s3_bucket}/cluster-1", endpoint_url=s3_endpoint)
    run(_write_list_and_read_back(store, seal_age_s=0.25))


@pytest.mark.unit
def test_writer_on_the_local_store_with_a_few_ms_seal_age(tmp_path: Path) -> None:
    store = open_object_store(tmp_path.as_uri())
    run(_write_list_and_read_back(store, seal_age_s=0.003, clock=ManualClock()))


@pytest.mark.integration
def test_s3_endpoint_comes_from_the_environment(
    s3_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZONEGATE_S3_ENDPOINT", s3_endpoint)

    async def body() -> None:
        store = open_object_store(f"s3://{s3_bucket}")
        await store.put("k", b"v")
        assert await store.get("k") == b"v"
        await store.close()

    run(body())


@pytest.mark.integration
def test_s3_errors_are_classified_not_retried_blindly(s3_endpoint: str) -> None:
    from zonegate.storage.objects import PermanentObjectStoreError

    async def body() -> None:
        store = open_object_store("s3://no-such-bucket-here/p", endpoint_url=s3_endpoint)
        with pytest.raises(PermanentObjectStoreError, match="NoSuchBucket"):
            await store.put("k", b"v")
        assert store.stats().put_requests == 1  # no retries on a permanent error
        await store.close()

    run(body())


@pytest.mark.integration
def test_s3_connection_failures_are_transient_and_retried() -> None:
    from zonegate.storage.objects import TransientObjectStoreError

    async def body() -> None:
        # Port 1 on loopback: nothing listens, the connection is refused at once.
        store = open_object_store("s3://b/p", endpoint_url="http://127.0.0.1:1", retries=2)
        with pytest.raises(TransientObjectStoreError):
            await store.get("k")
        assert store.stats().get_requests == 3
        await store.close()

    run(body())


@pytest.mark.integration
def test_s3_put_sends_the_bytes_once_with_a_crc32c_and_no_expect_round_trip(
    s3_endpoint: str, s3_bucket: str
) -> None:
    import base64

    import crc32c

    from zonegate.storage.s3_store import S3ObjectStore, _UncopiedBody

    async def body() -> None:
        sent: list[tuple[dict[str, str], object]] = []

        def capture(request: Any, **_: Any) -> None:
            headers = {k.lower(): _text(v) for k, v in request.headers.items()}
            sent.append((headers, request.body))

        for sign in (False, True):
            sent.clear()
            backend = S3ObjectStore(s3_bucket, "p", endpoint_url=s3_endpoint, sign_payload=sign)
            client = await backend._get_client()
            client.meta.events.register("before-send.s3.PutObject", capture)
            data = bytes(range(256)) * 8192  # 2 MiB: above botocore's 1 MiB Expect threshold
            await backend.put("k", data)
            assert await backend.get("k") == data
            assert not await backend.put_if_absent("k", b"other")
            assert await backend.get("k") == data
            await backend.close()

            (headers, sent_body), _ = sent
            # Handed to the HTTP layer as is (not wrapped in a BytesIO or copied),
            # headers first, then a view of the very same bytes.
            assert isinstance(sent_body, _UncopiedBody)
            assert sent_body._value is data
            assert "expect" not in headers
            assert "content-md5" not in headers
            want = base64.b64encode(crc32c.crc32c(data).to_bytes(4, "big")).decode()
            assert headers["x-amz-checksum-crc32c"] == want
            assert not any(
                h.startswith("x-amz-checksum-crc32") and h != "x-amz-checksum-crc32c"
                for h in headers
            )
            assert "x-amz-checksum-crc32c" in headers["authorization"]  # signed
            sha = headers["x-amz-content-sha256"]
            assert (sha != "UNSIGNED-PAYLOAD") if sign else (sha == "UNSIGNED-PAYLOAD")

    run(body())


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
