"""One connection's authentication, sans-IO: Kafka's SaslServerAuthenticator as a state table.

Requests and SASL tokens in, decisions out; the server moves the bytes. States:

    HANDSHAKE_OR_VERSIONS --ApiVersions--> HANDSHAKE
    HANDSHAKE_OR_VERSIONS, HANDSHAKE --SaslHandshake(enabled mechanism)--> AUTHENTICATE
    AUTHENTICATE --token, mechanism complete--> COMPLETE
    COMPLETE --SaslHandshake (KIP-368 re-authentication)--> AUTHENTICATE (or REAUTH_BAD_MECHANISM)
    any --failure--> FAILED (the server answers after failed_auth_delay_ms, then closes)

`admits` says which requests each state serves (`_ADMITTED`); anything else
closes the connection, as Kafka's authenticator does (after SaslHandshake, with
that API's ILLEGAL_SASL_STATE answer first, as Kafka's handleSaslToken). PLAINTEXT and SSL
listeners have no SASL: every request is served and SaslHandshake /
SaslAuthenticate answer ILLEGAL_SASL_STATE, as KafkaApis does.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from zonegate.proxy.auth.jwks import JwksKeys, token_kid
from zonegate.proxy.auth.listener import (
    OAUTHBEARER,
    PLAIN,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ListenerSecurity,
)
from zonegate.proxy.auth.mechanisms import (
    AuthenticationFailed,
    InvalidCredentials,
    OAuthBearerServer,
    PlainServer,
    SaslServer,
    ScramServer,
    parse_oauth_first,
)
from zonegate.runtime.clock import Clock
from zonegate.services.credentials import ScramCredentialSource

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
_MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


# The Kafka requests each state serves (the SASL token states serve SaslAuthenticate
# only after a v1+ handshake; after a v0 handshake tokens come raw, see raw_mode).
_ADMITTED: dict[State, frozenset[int]] = {
    State.HANDSHAKE_OR_VERSIONS: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
    State.HANDSHAKE: frozenset({SASL_HANDSHAKE}),
    State.AUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    State.REAUTH_BAD_MECHANISM: frozenset({SASL_AUTHENTICATE}),
    State.FAILED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether to serve a request. When not: close the connection, after `delay_ms`
    (authentication failures wait connection.failed.authentication.delay.ms), and log
    `reason` (Kafka's words). `error_code`, when set, is the error Kafka answers the
    refused request with before closing (ILLEGAL_SASL_STATE), if the server can."""

    serve: bool
    reason: str = ""
    delay_ms: int = 0
    error_code: int | None = None


SERVE = Decision(True)


@dataclass(frozen=True, slots=True)
class AuthStep:
    """The answer to one SASL token. `failed`: answer after `delay_ms`, then close."""

    reply: bytes
    error_code: int = ErrorCode.none.value
    error_message: str | None = None
    session_lifetime_ms: int = 0
    failed: bool = False
    delay_ms: int = 0


def _api_name(api_key: int) -> str:
    """Kafka's ApiKeys name, as its messages print it: SASL_AUTHENTICATE."""
    name = api_key_map.get(api_key)
    return name.upper() if name is not None else str(api_key)


def _api_versions_max() -> int:
    from zonegate.proxy.registry import REGISTRY  # noqa: PLC0415 (handlers register late)

    reg = REGISTRY.lookup(API_VERSIONS)
    return reg.max_version if reg is not None else 3


class ConnectionAuth:
    """One connection's authentication. See the package docstring for how a server drives it."""

    def __init__(
        self,
        security: ListenerSecurity,
        scram: ScramCredentialSource,
        keys: JwksKeys | None,
        clock: Clock,
        tls_principal: str | None = None,
    ) -> None:
        self.security = security
        self._scram = scram
        self._keys = keys
        self._clock = clock
        # the mapped certificate name (map_principal's result); tolerate "User:x" too
        self._tls_principal = (
            None
            if tls_principal is None
            else tls_principal
            if tls_principal.startswith("User:")
            else f"User:{tls_principal}"
        )
        self._state = State.HANDSHAKE_OR_VERSIONS if security.sasl else State.COMPLETE
        self._server: SaslServer | None = None
        self._mechanism: str | None = None
        self._principal: str | None = None
        self._raw = False
        self._session_expires_ms: int | None = None  # wall clock
        self._client_reauthenticates = False  # sent SaslAuthenticate v1+ (Kafka's check)
        self._reauth_started: float | None = None
        self._reauth_from: tuple[str, str] | None = None  # (mechanism, principal) before
        self._bad_mechanism_message = ""
        self._failure: str | None = None  # why authentication failed, for the log

    # -- what the server reads ------------------------------------------------------

    @property
    def state(self) -> State:
        return self._state

    @property
    def principal(self) -> str:
        if self._principal is not None:
            return self._principal
        if self._tls_principal is not None and not self.security.sasl:
            return self._tls_principal
        return ANONYMOUS

    @property
    def mechanism(self) -> str | None:
        return self._mechanism

    @property
    def authenticated(self) -> bool:
        """Past the SASL exchange (always, on PLAINTEXT and SSL listeners)."""
        return self._state == State.COMPLETE or (
            self._reauth_from is not None and self._state != State.FAILED
        )

    @property
    def failed(self) -> bool:
        return self._state == State.FAILED

    def failure_log_line(self, peer: str) -> str:
        """Kafka's INFO line for a failed authentication (its Selector's), naming the
        mechanism too: `Failed authentication with /10.0.0.7:51234 (...)`."""
        again = "re-" if self._reauth_from is not None else ""
        mechanism = f"SASL mechanism {self._mechanism}: " if self._mechanism else ""
        return f"Failed {again}authentication with {peer} ({mechanism}{self._failure or ''})"

    @property
    def failure_delay_ms(self) -> int:
        return self.security.failed_auth_delay_ms

    @property
    def raw_mode(self) -> bool:
        """After SaslHandshake v0: the next frames are raw SASL tokens (4-byte size,
        no Kafka header) for `raw_token`, until authentication completes or fails."""
        return self._raw and self._state == State.AUTHENTICATE

    def expired(self, now_ms: int | None = None) -> bool:
        """KIP-368: the session's lifetime passed without re-authentication (the server
        then closes the connection at its next request). `now_ms`: the clock's if None."""
        if self._session_expires_ms is None:
            return False
        now = self._clock.wall_ms() if now_ms is None else now_ms
        return now > self._session_expires_ms

    # -- requests ------------------------------------------------------------------

    def admits(self, api_key: int, api_version: int) -> Decision:
        """Whether the request may be served now. Call it once for every Kafka request,
        in the order they arrive, before handling it: it moves the state on."""
        if not self.security.sasl:
            return SERVE
        state = self._state
        if state == State.COMPLETE:
            if api_key == SASL_HANDSHAKE and self._may_reauthenticate():
                return SERVE  # re-authentication, even of an expired session
            if self.expired():
                return Decision(False, "Disconnecting expired channel (KIP-368 session expired)")
            return SERVE
        if api_key in _ADMITTED[state]:
            if api_key == API_VERSIONS and api_version <= _api_versions_max():
                # Kafka moves on once it answered ApiVersions; a version it does not
                # know gets UNSUPPORTED_VERSION and the client may ask again (KIP-511)
                self._state = State.HANDSHAKE
            return SERVE
        if state == State.FAILED:
            return Decision(False, "authentication failed", self.failure_delay_ms)
        name = _api_name(api_key)
        if state == State.HANDSHAKE and api_key == API_VERSIONS:
            # not an authentication failure in Kafka (an IllegalStateException): no delay
            return Decision(
                False,
                self._set_failed(
                    "Unexpected ApiVersions request received during SASL authentication "
                    "state HANDSHAKE_REQUEST"
                ),
            )
        if state in (State.AUTHENTICATE, State.REAUTH_BAD_MECHANISM):
            # Kafka's handleSaslToken answers this request with its API's error response
            # (ILLEGAL_SASL_STATE) after the delay, then closes. In the handshake states
            # (below) its handleKafkaRequest fails before building any answer: there the
            # connection just closes, after the delay.
            return Decision(
                False,
                self._set_failed(
                    f"Unexpected Kafka request of type {name} during SASL authentication."
                ),
                self.failure_delay_ms,
                ErrorCode.illegal_sasl_state.value,
            )
        return Decision(
            False,
            self._set_failed(f"Unexpected Kafka request of type {name} during SASL handshake."),
            self.failure_delay_ms,
        )

    def handshake(self, version: int, mechanism: str) -> tuple[int, tuple[str, ...]]:
        """SaslHandshake: (error code, the mechanisms to list in the answer)."""
        enabled = self.security.mechanisms
        if not self.security.sasl:
            return ErrorCode.illegal_sasl_state.value, ()
        state = self._state
        if state == State.COMPLETE:
            if not self._may_reauthenticate():
                return ErrorCode.illegal_sasl_state.value, ()
            assert self._mechanism is not None and self._principal is not None
            self._reauth_from = (self._mechanism, self._principal)
            self._reauth_started = self._clock.monotonic()
        elif state not in (State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE):
            self._set_failed(
                "Unexpected Kafka request of type SASL_HANDSHAKE during SASL authentication."
            )
            return ErrorCode.illegal_sasl_state.value, ()
        if mechanism not in enabled:
            self._set_failed(f"Unsupported SASL mechanism {mechanism}")
            return ErrorCode.unsupported_sasl_mechanism.value, enabled
        self._raw = version == 0
        if self._reauth_from is not None and mechanism != self._reauth_from[0]:
            self._bad_mechanism_message = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._reauth_from[0]}'"
            )
            self._state = State.REAUTH_BAD_MECHANISM
            return ErrorCode.none.value, enabled
        self._server = self._new_server(mechanism)
        self._mechanism = mechanism
        self._state = State.AUTHENTICATE
        return ErrorCode.none.value, enabled

    def _may_reauthenticate(self) -> bool:
        # Kafka's KafkaChannel.maybeBeginServerReauthentication: only a client that said
        # it can (SaslAuthenticate v1+), at most once a second.
        if not self._client_reauthenticates or self._mechanism is None:
            return False
        started = self._reauth_started
        return started is None or self._clock.monotonic() - started >= _MIN_REAUTH_INTERVAL_S

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self.security.plain_users)
        if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
            return ScramServer(mechanism, self._scram)
        assert mechanism == OAUTHBEARER and self.security.oauth is not None
        return OAuthBearerServer(self._keys, self.security.oauth, self._clock.wall_ms())

    async def prepare(self, token: bytes) -> None:
        """The only asynchronous step: for OAUTHBEARER, refresh the JWKS when the
        token's key id is unknown or the keys are stale. Await it before
        `authenticate` / `raw_token` with the same token."""
        keys = self._keys
        if keys is None or self._mechanism != OAUTHBEARER or self._state != State.AUTHENTICATE:
            return
        try:
            jwt, _ = parse_oauth_first(token)
        except InvalidCredentials:
            return  # authenticate() refuses it
        kid = token_kid(jwt)
        if keys.refresh_due(kid):
            await keys.refresh(kid)

    def authenticate(self, auth_bytes: bytes, version: int = 2) -> AuthStep:
        """SaslAuthenticate (v0-2) with the client's token."""
        if not self.security.sasl or (self._state == State.COMPLETE and self._reauth_from is None):
            return AuthStep(
                b"",
                ErrorCode.illegal_sasl_state.value,
                "SaslAuthenticate request received after successful authentication",
            )
        if version > 0:
            self._client_reauthenticates = True
        return self._evaluate(auth_bytes)

    def raw_token(self, token: bytes) -> AuthStep:
        """A raw SASL token (after SaslHandshake v0). On failure the server sends
        nothing (Kafka answers raw tokens only on success) and closes after delay_ms."""
        return self._evaluate(token)

    def _set_failed(self, reason: str) -> str:
        self._state = State.FAILED
        self._failure = reason
        return reason

    def _fail(self, message: str) -> AuthStep:
        self._set_failed(message)
        return AuthStep(
            b"",
            ErrorCode.sasl_authentication_failed.value,
            message,
            failed=True,
            delay_ms=self.failure_delay_ms,
        )

    def _what(self) -> str:
        return "re-authentication" if self._reauth_from is not None else "authentication"

    def _evaluate(self, token: bytes) -> AuthStep:
        if self._state == State.REAUTH_BAD_MECHANISM:
            return self._fail(self._bad_mechanism_message)
        if self._state != State.AUTHENTICATE or self._server is None:
            message = f"Unexpected SASL token in state {self._state.value}"
            return AuthStep(
                b"",
                ErrorCode.illegal_sasl_state.value,
                self._set_failed(message),
                failed=True,
                delay_ms=self.failure_delay_ms,
            )
        server = self._server
        if isinstance(server, OAuthBearerServer):
            server.at(self._clock.wall_ms())
        try:
            reply = server.evaluate(token)
        except AuthenticationFailed as exc:
            return self._fail(str(exc))
        except InvalidCredentials as exc:
            log.debug("%s failed: %s", self._what(), exc)
            return self._fail(
                f"Authentication failed during {self._what()} due to invalid credentials "
                f"with SASL mechanism {server.mechanism}"
            )
        if not server.complete:
            return AuthStep(reply)
        principal = f"User:{server.authorization_id}"
        if self._reauth_from is not None and principal != self._reauth_from[1]:
            before, after = self._reauth_from[1], principal
            return self._fail(
                "Cannot change principals during re-authentication from "
                f"{before.replace(':', '.', 1)}: {after.replace(':', '.', 1)}"
            )
        lifetime = self._session_lifetime_ms(server.credential_expiry_ms)
        self._principal = principal
        self._state = State.COMPLETE
        self._raw = False
        self._reauth_from = None
        return AuthStep(reply, session_lifetime_ms=lifetime)

    def _session_lifetime_ms(self, credential_expiry_ms: int | None) -> int:
        """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs."""
        assert self._mechanism is not None
        reauth = self.security.reauth_ms_for(self._mechanism)
        now = self._clock.wall_ms()
        if credential_expiry_ms is None and reauth <= 0:
            self._session_expires_ms = None
            return 0
        if credential_expiry_ms is None:
            lifetime = max(0, reauth)
        elif reauth <= 0:
            lifetime = max(0, credential_expiry_ms - now)
        else:
            lifetime = max(0, min(credential_expiry_ms - now, reauth))
        self._session_expires_ms = now + lifetime
        return lifetime
