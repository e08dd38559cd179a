"""The server side of each SASL mechanism, sans-IO: client tokens in, challenges out.

Kafka's PlainSaslServer, ScramSaslServer and OAuthBearerSaslServer, with
their messages. A mechanism raises `AuthenticationFailed(message)` where Kafka
throws SaslAuthenticationException (the message goes to the client as is) and
`InvalidCredentials` where Kafka throws a plain SaslException (the client
then gets Kafka's generic "Authentication failed during authentication due to
invalid credentials with SASL mechanism X", which never says whether the user
exists). SCRAM's proofs are scramp's (RFC 5802/7677); OAUTHBEARER's JWTs are
checked by `jwks.validate_jwt` against keys the caller fetched beforehand.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from typing import Protocol

import scramp

from zonegate.proxy.auth.jwks import InvalidToken, JwksKeys, validate_jwt
from zonegate.proxy.auth.listener import OAuthSettings
from zonegate.services.credentials import ScramCredentialSource


class AuthenticationFailed(Exception):
    """Kafka's SaslAuthenticationException: its message is the client's."""


class InvalidCredentials(Exception):
    """Kafka's SaslException: logged; the client gets the generic message."""


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential used stops being valid (a JWT's exp), if it does."""
        ...

    def evaluate(self, response: bytes) -> bytes: ...


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._user: str | None = None

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        assert self._user is not None
        return self._user

    @property
    def credential_expiry_ms(self) -> int | None:
        return None

    def evaluate(self, response: bytes) -> bytes:
        # RFC 4616: [authzid] NUL authcid NUL passwd
        tokens = response.decode("utf-8", errors="replace").split("\x00", 3)
        if len(tokens) != 3:
            got = min(len(tokens), 4)
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {got}")
        authzid, user, password = tokens
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        # compare_digest so that the time taken does not tell how much of it matched
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._user = user
        return b""


# Kafka's ClientFirstMessage: only gs2 flag "n" (no channel binding), optional authzid.
_GS2 = re.compile(r"n,(?:a=(?P<authzid>(?:[^=,]|=2C|=3D)+))?,")
_USER = re.compile(r"n=((?:[^=,]|=2C|=3D)+),")


def _unescape(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    def __init__(self, mechanism: str, source: ScramCredentialSource) -> None:
        self.mechanism = mechanism
        self._source = source
        self._scramp = scramp.ScramMechanism(mechanism).make_server(self._lookup)
        self._stage = 0  # 0: client-first expected, 1: client-final expected, 2: complete
        self._user: str | None = None

    def _lookup(self, user: str) -> tuple[bytes, bytes, bytes, int] | None:
        cred = self._source.scram_credential(user, self.mechanism)
        if cred is None:
            return None
        self._user = user
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    @property
    def complete(self) -> bool:
        return self._stage == 2

    @property
    def authorization_id(self) -> str:
        assert self._user is not None and self.complete
        return self._user

    @property
    def credential_expiry_ms(self) -> int | None:
        return None  # delegation tokens are not served here

    def evaluate(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCredentials("SCRAM message is not UTF-8") from None
        if self._stage == 0:
            return self._first(text)
        if self._stage == 1:
            try:
                self._accept_repeated_client_nonce(text)
                self._scramp.set_client_final(text)
                final: str = self._scramp.get_server_final()
            except scramp.ScramException as exc:
                self._stage = 3
                raise InvalidCredentials(f"Invalid client final message: {exc}") from None
            self._stage = 2
            return final.encode()
        raise InvalidCredentials(f"Unexpected challenge in Sasl server state {self._stage}")

    def _accept_repeated_client_nonce(self, text: str) -> None:
        """librdkafka before 2.6.1 (Debian's kcat: 2.0.2) sends its client nonce again in
        front of the combined nonce of its final message. Kafka up to 3.9 takes a final
        nonce that ends with the combined one (ScramSaslServer's endsWith), and the proof
        is over the message as sent, so it still proves the password for this exchange
        (the server's fresh nonce is in it): taken here as Kafka 3.9 takes it. scramp
        compares the nonces for equality, so it is told the nonce the client used."""
        sent = next((f[2:] for f in text.split(",") if f.startswith("r=")), None)
        expected = getattr(self._scramp, "nonce", None)
        if sent is None or expected is None or sent == str(expected):
            return
        if sent.endswith(str(expected)):
            self._scramp.nonce = type(expected)(sent)

    def _first(self, text: str) -> bytes:
        gs2 = _GS2.match(text)
        if gs2 is None:
            self._stage = 3
            raise InvalidCredentials("Invalid SCRAM client first message format")
        authzid = _unescape(gs2.group("authzid") or "")
        if authzid:
            # scramp refuses any authzid; Kafka refuses one other than the user, after
            # looking the user up (an unknown user gets the generic message first).
            self._stage = 3
            user = _USER.match(text, gs2.end())
            name = _unescape(user.group(1)) if user is not None else ""
            if user is None or self._source.scram_credential(name, self.mechanism) is None:
                raise InvalidCredentials("Authentication failed: Invalid user credentials")
            if authzid != name:
                raise AuthenticationFailed(
                    "Authentication failed: Client requested an authorization id that is "
                    "different from username"
                )
            raise InvalidCredentials("an authorization id is not supported (scramp)")
        try:
            self._scramp.set_client_first(text)
            first: str = self._scramp.get_server_first()
        except scramp.ScramException as exc:
            self._stage = 3
            # unknown user included: Kafka's "Invalid user credentials" is a SaslException
            raise InvalidCredentials(f"Authentication failed: {exc}") from None
        self._stage = 1
        return first.encode()


# Kafka's OAuthBearerClientInitialResponse grammar (RFC 7628 section 3.1).
_OAUTH_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_OAUTH_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+))?,\x01"
    r"(?P<kvpairs>" + _OAUTH_KVPAIRS + r")\x01"
)
_OAUTH_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)
_INVALID_TOKEN = '{"status":"invalid_token"}'


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, keys: JwksKeys | None, settings: OAuthSettings, now_ms: int) -> None:
        self._keys = keys
        self._settings = settings
        self._now_ms = now_ms
        self._principal: str | None = None
        self._expiry: int | None = None
        self._error: str | None = None

    def at(self, now_ms: int) -> None:
        """The time the next token is judged at (the authenticator's clock)."""
        self._now_ms = now_ms

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def authorization_id(self) -> str:
        assert self._principal is not None
        return self._principal

    @property
    def credential_expiry_ms(self) -> int | None:
        return self._expiry

    def evaluate(self, response: bytes) -> bytes:
        if response == b"\x01" and self._error is not None:
            # the client acknowledged our error challenge (RFC 7628 section 3.2.3)
            raise AuthenticationFailed(self._error)
        self._error = None
        token, authzid = parse_oauth_first(response)
        try:
            if self._keys is None:
                raise InvalidToken("no JWKS endpoint configured")
            valid = validate_jwt(token, self._keys.key_set, self._settings, self._now_ms)
        except InvalidToken:
            self._error = _INVALID_TOKEN
            return self._error.encode()
        if authzid and authzid != valid.principal:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({valid.principal})"
            )
        self._principal, self._expiry = valid.principal, valid.expires_ms
        return b""


def parse_oauth_first(response: bytes) -> tuple[str, str]:
    """(token, authzid) of an OAUTHBEARER client first message; InvalidCredentials if
    it is not one (Kafka's SaslException, so the generic message)."""
    try:
        text = response.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message") from None
    m = _OAUTH_FIRST.fullmatch(text)
    if m is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message")
    pairs = dict(p.split("=", 1) for p in m.group("kvpairs").split("\x01") if p)
    auth = pairs.get("auth")
    if auth is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _OAUTH_AUTH.fullmatch(auth)
    if am is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise InvalidCredentials(
            f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}"
        )
    return am.group("token"), m.group("authzid") or ""
