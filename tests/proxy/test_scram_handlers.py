"""AlterUserScramCredentials and DescribeUserScramCredentials as bytes: each request
encoded as a client sends it, decoded as the server does, handled over the real
SCRAM service (on a SQLite file), and the answer encoded and read back; both
advertised in ApiVersions. No network, no sleeps."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_user_scram_credentials.v0 import request as alter_req
from kio.schema.describe_user_scram_credentials.v0 import request as describe_req
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from zonegate.metastore.api import open_metastore
from zonegate.proxy.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    response_type,
)
from zonegate.proxy.context import ClientInfo, RequestContext
from zonegate.proxy.handlers import alter_user_scram_credentials, describe_user_scram_credentials
from zonegate.proxy.registry import REGISTRY
from zonegate.runtime.clock import SYSTEM_CLOCK
from zonegate.services.authorizer import AuthorizerService
from zonegate.services.scram import ScramService

pytestmark = pytest.mark.unit


class _Services:
    def __init__(self, scram: ScramService) -> None:
        self.scram = scram
        self.authorizer = AuthorizerService(None, SYSTEM_CLOCK, enabled=False)


async def _exchange(services: _Services, request: Any) -> Any:
    """The request through the codec, the handler and back, as a client reads it."""
    frame = encode_request(9, "t", request)[4:]
    header, offset = peek_header(frame)
    decoded = decode_request(frame, header, offset)
    ctx = RequestContext(
        services=services,  # type: ignore[arg-type]
        principal="User:ANONYMOUS",
        listener="PLAINTEXT",
        client=ClientInfo("127.0.0.1", 1, 1),
        client_zone="zone-a",
        api_key=header.api_key,
        api_version=header.api_version,
        correlation_id=9,
        client_id="t",
        request_bytes=len(frame),
    )
    handler = {50: describe_user_scram_credentials, 51: alter_user_scram_credentials}
    answer = await handler[header.api_key].handle(ctx, decoded.body)
    out = encode_response(9, header.api_key, answer)[4:]
    _, back = decode_response(out, response_type(header.api_key, header.api_version))
    return back


def _upsertion(user: str, mechanism: int, iterations: int) -> Any:
    salt = b"0123456789abcdef"
    digest = "sha256" if mechanism == 1 else "sha512"
    return alter_req.ScramCredentialUpsertion(
        name=user,
        mechanism=i8(mechanism),
        iterations=i32(iterations),
        salt=salt,
        salted_password=hashlib.pbkdf2_hmac(digest, b"pw", salt, max(iterations, 1)),
    )


def test_both_are_served_and_advertised_at_v0() -> None:
    for key in (50, 51):
        reg = REGISTRY.lookup(key)
        assert reg is not None and (reg.min_version, reg.max_version) == (0, 0)


def test_alter_then_describe_as_a_client_reads_them(tmp_path: Path) -> None:
    async def body() -> None:
        store = open_metastore(f"sqlite:///{tmp_path / 'meta.db'}")
        try:
            services = _Services(ScramService(store))
            altered = await _exchange(
                services,
                alter_req.AlterUserScramCredentialsRequest(
                    deletions=(alter_req.ScramCredentialDeletion(name="ghost", mechanism=i8(1)),),
                    upsertions=(
                        _upsertion("alice", 2, 8192),
                        _upsertion("bob", 1, 4096),
                        _upsertion("few", 1, 100),
                        _upsertion("odd", 7, 4096),
                    ),
                ),
            )
            got = [(r.user, r.error_code, r.error_message) for r in altered.results]
            assert got == [
                ("alice", ErrorCode.none, None),
                ("bob", ErrorCode.none, None),
                (
                    "ghost",
                    ErrorCode.resource_not_found,
                    "Attempt to delete a user credential that does not exist",
                ),
                ("few", ErrorCode.unacceptable_credential, "Too few iterations"),
                ("odd", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            ]
            every = await _exchange(
                services, describe_req.DescribeUserScramCredentialsRequest(users=None)
            )
            assert every.error_code == ErrorCode.none and every.error_message is None
            assert [
                (r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                for r in every.results
            ] == [("alice", ErrorCode.none, [(2, 8192)]), ("bob", ErrorCode.none, [(1, 4096)])]
            named = await _exchange(
                services,
                describe_req.DescribeUserScramCredentialsRequest(
                    users=(describe_req.UserName(name="carol"), describe_req.UserName(name="bob"))
                ),
            )
            assert [(r.user, r.error_code, r.error_message) for r in named.results] == [
                (
                    "carol",
                    ErrorCode.resource_not_found,
                    "Attempt to describe a user credential that does not exist: carol",
                ),
                ("bob", ErrorCode.none, None),
            ]
        finally:
            await store.close()

    asyncio.run(body())
