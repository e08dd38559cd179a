"""SaslAuthenticate (key 36), v0-2: one SASL token of the client, one of the server.

The token goes to the connection's authenticator (`ctx.auth`, proxy/auth),
after the one asynchronous step it may need (OAUTHBEARER: fetching the JWKS
when the token's key id is unknown or the keys are stale). Its answer carries
the server's token, Kafka's error code and message (SASL_AUTHENTICATION_FAILED
with the mechanism's message; the server then answers after
connection.failed.authentication.delay.ms and closes) and, from v1, the
session's lifetime (KIP-368). On PLAINTEXT and SSL listeners, and once
authenticated, the answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis gives.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

API_KEY = 36
_AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


@REGISTRY.register(API_KEY, 0, 2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    auth = ctx.auth
    if auth is None:  # a listener without authentication: KafkaApis' answer
        return _answer(ctx, ErrorCode.illegal_sasl_state.value, _AFTER_AUTHENTICATION, b"", 0)
    await auth.prepare(request.auth_bytes)
    step = auth.authenticate(request.auth_bytes, ctx.api_version)
    return _answer(ctx, step.error_code, step.error_message, step.reply, step.session_lifetime_ms)


def _answer(
    ctx: RequestContext, code: int, message: str | None, reply: bytes, lifetime_ms: int
) -> Any:
    return make(
        cls(ctx, "SaslAuthenticateResponse"),
        error_code=ErrorCode(code),
        error_message=message,
        auth_bytes=reply,
        session_lifetime=datetime.timedelta(milliseconds=lifetime_ms),
    )
