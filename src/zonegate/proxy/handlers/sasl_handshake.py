"""SaslHandshake (key 17), v0-1: the client names its SASL mechanism.

The connection's authenticator (`ctx.auth`, proxy/auth) decides: on a SASL
listener before authentication, NONE and the enabled mechanisms, then SASL
tokens follow (v0: raw, framed by a 4-byte size; v1: in SaslAuthenticate
requests), or UNSUPPORTED_SASL_MECHANISM with the enabled list, after which the
server closes the connection. On an authenticated connection it begins KIP-368
re-authentication. On PLAINTEXT and SSL listeners (and on a connection that may
not re-authenticate) the answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis gives.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from zonegate.proxy.context import RequestContext
from zonegate.proxy.handlers.common import cls
from zonegate.proxy.registry import REGISTRY
from zonegate.proxy.schema import make

API_KEY = 17


@REGISTRY.register(API_KEY, 0, 1)
async def handle(ctx: RequestContext, request: Any) -> Any:
    code: int = ErrorCode.illegal_sasl_state.value  # no authenticator: KafkaApis' answer
    mechanisms: tuple[str, ...] = ()
    if ctx.auth is not None:
        code, mechanisms = ctx.auth.handshake(ctx.api_version, request.mechanism)
    return make(
        cls(ctx, "SaslHandshakeResponse"),
        error_code=ErrorCode(code),
        mechanisms=tuple(mechanisms),
    )
