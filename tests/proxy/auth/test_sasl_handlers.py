"""SaslHandshake (17) and SaslAuthenticate (36) through the codec: requests encoded as a
client sends them, the registered handler run with a context, answers decoded."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
import scramp
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v0.request import (
    SaslAuthenticateRequest as SaslAuthenticateRequestV0,
)
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.protocol import RequestPayload

import zonegate.proxy.handlers  # noqa: F401  (registers every handler)
from tests.proxy.auth.sasl_clients import ScramUsers, TokenIssuer, oauth_first, oauth_settings
from zonegate.proxy.auth import ConnectionAuth, JwksKeys, ListenerSecurity
from zonegate.proxy.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    response_type,
)
from zonegate.proxy.context import ClientInfo, RequestContext
from zonegate.proxy.registry import REGISTRY
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit

MECHS = ("SCRAM-SHA-512", "OAUTHBEARER")


def _roundtrip(auth: ConnectionAuth | None, request: RequestPayload) -> Any:
    """Encodes the request, admits and serves it as the server would, decodes the answer."""
    frame = encode_request(7, "client-1", request)[4:]
    header, offset = peek_header(frame)
    if auth is not None:
        assert auth.admits(header.api_key, header.api_version).serve
    decoded = decode_request(frame, header, offset)
    ctx = RequestContext(
        services=None,  # type: ignore[arg-type]  # the SASL handlers use no service
        principal=auth.principal if auth is not None else "User:ANONYMOUS",
        listener="SASL_SSL",
        client=ClientInfo("127.0.0.1", 50000, 1),
        client_zone="zone-a",
        api_key=header.api_key,
        api_version=header.api_version,
        correlation_id=header.correlation_id,
        client_id=header.client_id,
        request_bytes=len(frame) + 4,
        auth=auth,
    )
    handler = REGISTRY.handler_for(header.api_key, header.api_version)
    assert handler is not None
    answer = asyncio.run(handler(ctx, decoded.body))
    wire = encode_response(header.correlation_id, header.api_key, answer)
    correlation_id, body = decode_response(
        wire[4:], response_type(header.api_key, header.api_version)
    )
    assert correlation_id == 7
    return body


def _auth(reauth_ms: int = 0) -> tuple[ConnectionAuth, ManualClock, TokenIssuer]:
    clock = ManualClock()
    users = ScramUsers()
    users.add("bob", "bob-pw", "SCRAM-SHA-512")
    issuer = TokenIssuer()
    security = ListenerSecurity(
        "SASL_SSL", "SASL_SSL", MECHS, oauth=oauth_settings(), reauth_ms=reauth_ms
    )
    assert security.oauth is not None
    keys = JwksKeys(security.oauth, clock)
    keys.load(issuer.jwks())
    return ConnectionAuth(security, users, keys, clock), clock, issuer


def test_both_apis_are_registered_with_kafkas_versions() -> None:
    handshake, authenticate = REGISTRY.lookup(17), REGISTRY.lookup(36)
    assert handshake is not None and (handshake.min_version, handshake.max_version) == (0, 1)
    assert authenticate is not None
    assert (authenticate.min_version, authenticate.max_version) == (0, 2)


def test_scram_sha_512_through_the_codec() -> None:
    auth, _, _ = _auth(reauth_ms=60_000)
    answer = _roundtrip(auth, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    assert answer.error_code == ErrorCode.none and answer.mechanisms == MECHS
    client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "bob-pw")
    first = _roundtrip(auth, SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    assert first.error_code == ErrorCode.none and first.error_message is None
    assert first.session_lifetime == datetime.timedelta(0)
    client.set_server_first(first.auth_bytes.decode())
    final = _roundtrip(auth, SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
    assert final.error_code == ErrorCode.none
    client.set_server_final(final.auth_bytes.decode())
    assert final.session_lifetime == datetime.timedelta(milliseconds=60_000)
    assert auth.principal == "User:bob"


def test_unsupported_mechanism_through_the_codec() -> None:
    auth, _, _ = _auth()
    answer = _roundtrip(auth, SaslHandshakeRequestV0(mechanism="PLAIN"))
    assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
    assert answer.mechanisms == MECHS
    assert auth.failed


def test_oauthbearer_failure_through_the_codec_v0() -> None:
    auth, clock, issuer = _auth()
    _roundtrip(auth, SaslHandshakeRequest(mechanism="OAUTHBEARER"))
    token = issuer.token(clock.wall_ms(), aud="elsewhere")
    challenge = _roundtrip(auth, SaslAuthenticateRequestV0(auth_bytes=oauth_first(token)))
    assert challenge.error_code == ErrorCode.none
    assert challenge.auth_bytes == b'{"status":"invalid_token"}'
    failure = _roundtrip(auth, SaslAuthenticateRequestV0(auth_bytes=b"\x01"))
    assert failure.error_code == ErrorCode.sasl_authentication_failed
    assert failure.error_message == '{"status":"invalid_token"}'
    assert auth.failed


def test_without_an_authenticator_both_answer_illegal_sasl_state() -> None:
    handshake = _roundtrip(None, SaslHandshakeRequest(mechanism="PLAIN"))
    assert handshake.error_code == ErrorCode.illegal_sasl_state and handshake.mechanisms == ()
    answer = _roundtrip(None, SaslAuthenticateRequest(auth_bytes=b"\x00a\x00b"))
    assert answer.error_code == ErrorCode.illegal_sasl_state
    assert answer.error_message == (
        "SaslAuthenticate request received after successful authentication"
    )
