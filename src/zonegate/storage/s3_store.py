"""Object store over S3 (or anything speaking its API) through aiobotocore.

One long-lived client, created on first use and closed by `close()`. This
module only translates: S3 error codes become `ObjectNotFound`,
`TransientObjectStoreError` or `PermanentObjectStoreError`; retries are the
wrapper's job, so botocore's own retries are off (otherwise every attempt of
the wrapper would hide several requests, and usage records would undercount).

PUTs are made cheap (docs/object-store.md, "What a PUT costs"): the body goes
to the HTTP layer as the `bytes` it is (botocore would wrap it in a BytesIO,
which costs copies and an `Expect: 100-continue` round trip per PUT), and its
integrity rests on a CRC32C computed here in C and sent as
`x-amz-checksum-crc32c`, which S3 verifies, instead of botocore's CRC32 over a
file-like body plus, over plain HTTP, a SHA-256 of every body for the
signature.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import crc32c
from aiobotocore.session import get_session
from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import BytesPayload
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    ConnectionError,
    HTTPClientError,
    IncompleteReadError,
)
from botocore.handlers import convert_body_to_file_like_object

from zonegate.storage.objects import (
    DeletionUnit,
    ObjectInfo,
    ObjectNotFound,
    PermanentObjectStoreError,
    TransientObjectStoreError,
    check_range,
)

# S3 accepts at most this many keys per DeleteObjects call and returns at most
# this many keys per ListObjectsV2 page.
S3_PAGE = 1000

_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "ConditionalRequestConflict",  # a concurrent conditional write; retry decides
        "OperationAborted",
    }
)


class _UncopiedBody(BytesPayload):
    """A PUT body that reaches the socket without being copied whole.

    aiohttp would join the headers and the body into one new bytes object, and
    asyncio would then copy what the socket did not take at once, twice (a
    slice, then its buffer): three copies of every WAL object. Sent as headers
    first, then a memoryview of the body, at most the part the socket did not
    take is copied, once.
    """

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        send_headers = getattr(writer, "send_headers", None)
        if send_headers is not None:
            send_headers()
        view = memoryview(self._value)
        await writer.write(view if content_length is None else view[:content_length])


def _send_body_uncopied(request: Any, **_: Any) -> None:
    if type(request.body) is bytes and request.body:
        request.body = _UncopiedBody(request.body)


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


class S3ObjectStore:
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        timeout_s: float = 30.0,
        max_connections: int = 64,
        sign_payload: bool = False,
        ca_bundle: str | None = None,
    ) -> None:
        """`ca_bundle`: a PEM file of the CAs that sign an https:// endpoint's certificate
        (None: botocore's choice, AWS_CA_BUNDLE or the system's)."""
        self._bucket = bucket
        self._prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self._endpoint_url = endpoint_url
        self._verify: str | None = ca_bundle
        self._region = (
            region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1"
        )
        self._config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=min(timeout_s, 10.0),
            read_timeout=timeout_s,
            max_pool_connections=max_connections,
            # We send our own CRC32C with every PUT (see `_put`); botocore adds
            # checksums only where S3 requires one.
            request_checksum_calculation="when_required",
            s3={
                # Path style works with every S3 clone (moto, MinIO) behind a custom endpoint.
                **({"addressing_style": "path"} if endpoint_url else {}),
                # Without this botocore SHA-256-hashes every body sent over plain
                # HTTP for the signature; the signed CRC32C header, verified by
                # S3, already guards the body against corruption.
                "payload_signing_enabled": sign_payload,
            },
        )
        self._client: Any = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock = asyncio.Lock()

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        return self._prefix

    async def _get_client(self) -> Any:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                stack = contextlib.AsyncExitStack()
                session = get_session()
                self._client = await stack.enter_async_context(
                    session.create_client(
                        "s3",
                        endpoint_url=self._endpoint_url,
                        region_name=self._region,
                        config=self._config,
                        verify=self._verify,
                    )
                )
                # Keep a bytes Body as bytes: wrapped in a BytesIO it is copied by
                # the checksum and HTTP layers and sent after an extra round trip
                # (`Expect: 100-continue` is added for any file-like body).
                events = self._client.meta.events
                events.unregister(
                    "before-parameter-build.s3.PutObject", convert_body_to_file_like_object
                )
                # After signing, right before the HTTP layer takes the body.
                events.register("before-send.s3.PutObject", _send_body_uncopied)
                self._stack = stack
        return self._client

    def _full(self, key: str) -> str:
        if not key:
            raise ValueError("empty object key")
        return self._prefix + key

    @contextlib.asynccontextmanager
    async def _translate(self, key: str) -> AsyncIterator[None]:
        try:
            yield
        except ClientError as exc:
            code, status = _error_code(exc), _status(exc)
            if code in _NOT_FOUND_CODES:
                raise ObjectNotFound(key) from exc
            if code in _TRANSIENT_CODES or status >= 500 or status == 429:
                raise TransientObjectStoreError(f"S3 {code or status} on {key!r}: {exc}") from exc
            raise PermanentObjectStoreError(f"S3 {code or status} on {key!r}: {exc}") from exc
        except (ConnectionError, HTTPClientError, IncompleteReadError) as exc:
            raise TransientObjectStoreError(f"S3 connection failed on {key!r}: {exc}") from exc

    async def _put(self, key: str, data: bytes, **extra: str) -> None:
        client = await self._get_client()
        checksum = base64.b64encode(crc32c.crc32c(data).to_bytes(4, "big")).decode()
        async with self._translate(key):
            await client.put_object(
                Bucket=self._bucket,
                Key=self._full(key),
                Body=bytes(data),  # a no-op for bytes; bytearray/memoryview are copied
                ChecksumCRC32C=checksum,
                **extra,
            )

    async def put(self, key: str, data: bytes) -> None:
        await self._put(key, data)

    async def put_new(self, key: str, data: bytes) -> str:
        """One PUT under `key`, which is the key to read it by: a PUT costs the same
        whatever the object's size, so nothing is gained by sharing objects."""
        await self._put(key, data)
        return key

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        try:
            await self._put(key, data, IfNoneMatch="*")
        except PermanentObjectStoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and (
                _error_code(cause) == "PreconditionFailed" or _status(cause) == 412
            ):
                return False
            raise
        return True

    async def get(self, key: str) -> bytes:
        client = await self._get_client()
        async with self._translate(key):
            resp = await client.get_object(Bucket=self._bucket, Key=self._full(key))
            async with resp["Body"] as body:
                data: bytes = await body.read()
            return data

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        client = await self._get_client()
        try:
            async with self._translate(key):
                resp = await client.get_object(
                    Bucket=self._bucket,
                    Key=self._full(key),
                    Range=f"bytes={start}-{start + length - 1}",
                )
                async with resp["Body"] as body:
                    data: bytes = await body.read()
                return data
        except PermanentObjectStoreError as exc:
            # S3 answers 416 when the range starts at or past the end; the
            # protocol says that is an empty read, as for a local file.
            cause = exc.__cause__
            if isinstance(cause, ClientError) and _error_code(cause) == "InvalidRange":
                return b""
            raise

    async def delete_many(self, keys: Sequence[str]) -> None:
        if not keys:
            return
        client = await self._get_client()
        for i in range(0, len(keys), S3_PAGE):
            chunk = keys[i : i + S3_PAGE]
            async with self._translate(chunk[0]):
                resp = await client.delete_objects(
                    Bucket=self._bucket,
                    Delete={"Objects": [{"Key": self._full(k)} for k in chunk], "Quiet": True},
                )
            errors = [e for e in resp.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                first = errors[0]
                cls = (
                    TransientObjectStoreError
                    if first.get("Code") in _TRANSIENT_CODES
                    else PermanentObjectStoreError
                )
                raise cls(
                    f"S3 DeleteObjects failed for {len(errors)} keys, first "
                    f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message')}"
                )

    async def list(self, prefix: str) -> list[ObjectInfo]:
        client = await self._get_client()
        out: list[ObjectInfo] = []
        strip = len(self._prefix)
        async with self._translate(prefix):
            paginator = client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(
                Bucket=self._bucket,
                Prefix=self._prefix + prefix,
                PaginationConfig={"PageSize": S3_PAGE},
            ):
                for item in page.get("Contents", []):
                    modified = item.get("LastModified")
                    out.append(
                        ObjectInfo(
                            item["Key"][strip:],
                            int(item["Size"]),
                            int(modified.timestamp() * 1000) if modified is not None else 0,
                        )
                    )
        out.sort(key=lambda info: info.key)
        return out

    def deletion_unit(self, key: str) -> DeletionUnit:
        return DeletionUnit(key)  # every object is deleted on its own

    async def close(self) -> None:
        async with self._lock:
            stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()
