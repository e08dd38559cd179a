"""The security half of a Kafka connection: its TLS (proxy/tls.py) and its SASL
authentication (proxy/auth, through the listener's gate, proxy/gate.py).

`SecuredConnection` is the part of `KafkaConnection` (proxy/server.py) that moves
TLS records and raw SASL tokens and acts on the authenticator's decisions:
requests it does not admit close the connection (after the failed-authentication
delay when it says so, and after their ILLEGAL_SASL_STATE answer when Kafka sends
one), a failed SASL answer is sent after
connection.failed.authentication.delay.ms and the connection closed with one INFO
line, and a TLS handshake not finished in time, or not TLS at all, closes it with
one WARNING. The decisions themselves are proxy/auth's; this only moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from zonegate.proxy.error_answers import refusal_answer
from zonegate.proxy.gate import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    CertificateRefused,
    raw_token_frame,
)
from zonegate.proxy.tls import TlsError, TlsSession

if TYPE_CHECKING:
    from zonegate.proxy.auth import AuthStep, ConnectionAuth
    from zonegate.proxy.context import ClientInfo, RequestContext
    from zonegate.proxy.server import KafkaServer, ListenerConfig


# How long a connection stays open after its last answer (a failed authentication's,
# or the error answer to a request the authenticator refused), unless the client closes
# it first. Kafka closes at once after writing it; a client that reads the answer and the
# close in one pass may then report only the close: kafka-python 3 drops the bytes it read
# with the end of the stream ("socket disconnected" instead of Kafka's message) whenever
# it wakes after both arrived, as a loaded machine makes it. Nothing more is read meanwhile.
ANSWER_LINGER_S = 1.0


class SecuredConnection:
    """TLS and SASL of one connection; KafkaConnection provides the rest."""

    _server: KafkaServer
    _config: ListenerConfig
    _transport: asyncio.Transport | None
    _tls: TlsSession | None
    _handshake_timer: asyncio.TimerHandle | None
    _held: Any
    _closed: bool
    peer_dn: str | None
    auth: ConnectionAuth | None
    client: ClientInfo

    def abort(self, reason: str, level: int = logging.WARNING, linger_s: float = 0.0) -> None:
        raise NotImplementedError

    def _pause_reading(self, reason: str) -> None:
        raise NotImplementedError

    def _dispatch_held(self) -> None:
        raise NotImplementedError

    def _start_auth(self, peer_dn: str | None) -> bool:
        gate = self._server.gate
        if gate is None:
            return True
        try:
            self.auth = gate.connection(peer_dn)
        except CertificateRefused as exc:
            self.abort(f"client certificate refused: {exc}")
            return False
        return True

    def _handshake_timed_out(self) -> None:
        self.abort(
            f"TLS handshake not finished within {self._config.handshake_timeout_s:g}s "
            f"on listener {self._config.name}"
        )

    def _write(self, data: bytes) -> None:
        assert self._transport is not None
        if self._tls is not None:
            data = self._tls.send(data)
        self._transport.write(data)

    def _tls_handshake(self, data: bytes | memoryview) -> bool:
        """Moves the handshake on with `data` and sends what TLS answers; True once it is
        done and the connection may read frames (the records after the handshake's last
        flight wait in the session for the frame reader)."""
        assert self._tls is not None and self._transport is not None
        try:
            out = self._tls.handshake(data)
        except TlsError as exc:
            self.abort(f"{exc.reason} (listener {self._config.name})")
            return False
        if out:
            self._transport.write(out)
        if self._tls.peer_closed:
            self.abort("the client closed the TLS session", logging.DEBUG)
            return False
        if not self._tls.handshake_done:
            return False
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        self.peer_dn = self._tls.peer_dn()
        return self._start_auth(self.peer_dn)

    def _tls_flush(self) -> bool:
        """Sends what TLS itself has to say after records were read (session tickets, a
        KeyUpdate answer, our close_notify); False when the client closed its side: it
        sends nothing more, so the connection ends here, quietly."""
        assert self._tls is not None and self._transport is not None
        out = self._tls.outgoing()
        if out:
            self._transport.write(out)
        if self._tls.peer_closed:
            self.abort("the client closed the TLS session", logging.DEBUG)
            return False
        return True

    async def _raw_token(self, auth: ConnectionAuth, token: bytes) -> AuthStep:
        await auth.prepare(token)  # OAUTHBEARER: the JWKS, when stale or missing a key
        return auth.raw_token(token)

    async def _answer_raw_token(self, step: AuthStep) -> bool:
        """Writes the answer to a raw token; on failure (no answer, Kafka's way) waits
        the failed-authentication delay and closes: False."""
        if step.failed:
            await asyncio.sleep(step.delay_ms / 1000)
            self._close_failed_authentication(answered=False)
            return False
        self._write(raw_token_frame(step.reply))
        if self._held:
            self._dispatch_held()
        return True

    def _auth_failed(self, ctx: RequestContext, api_key: int) -> bool:
        return (
            api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE)
            and ctx.auth is not None
            and ctx.auth.failed
        )

    def _close_failed_authentication(self, answered: bool = True) -> None:
        """One INFO line naming the client and the mechanism, as Kafka logs a failed
        authentication, then the connection closed (`answered`: its answer already
        written, and the client given ANSWER_LINGER_S to read it)."""
        auth = self.auth
        peer = f"/{self.client.host}:{self.client.port}"
        line = (
            auth.failure_log_line(peer)
            if auth is not None
            else f"Failed authentication with {peer}"
        )
        linger = ANSWER_LINGER_S if answered else 0.0
        self.abort(f"{line} on listener {self._config.name}", logging.INFO, linger)

    def _refuse(
        self, reason: str, delay_ms: int, frame: bytes = b"", error_code: int | None = None
    ) -> None:
        """A request the authenticator does not admit: nothing more is read, and the
        connection closes after `delay_ms`; with `error_code`, the request (`frame`) is
        first answered with its API's error response carrying it, as Kafka does."""
        self._held.clear()
        self._pause_reading("refused")
        level = logging.INFO if "expired" in reason else logging.WARNING
        answer = refusal_answer(frame, error_code) if error_code is not None else None
        if delay_ms <= 0 and answer is None:
            self.abort(reason, level)
            return

        def answer_and_close() -> None:
            if answer is not None and not self._closed:
                self._write(answer)
                self.abort(reason, level, ANSWER_LINGER_S)
            else:
                self.abort(reason, level)

        asyncio.get_running_loop().call_later(max(0, delay_ms) / 1000, answer_and_close)
