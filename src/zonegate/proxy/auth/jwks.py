"""OAUTHBEARER's JWT check: the JWKS endpoint's keys, kept in memory, and the token's claims.

`JwksKeys` holds the key set of sasl.oauthbearer.jwks.endpoint.url. Its one
asynchronous method, `refresh`, fetches the set (stdlib urllib in a thread:
https, http or file URLs) and is awaited by the SaslAuthenticate handler (or the
server, for raw SASL tokens) before the sans-IO authenticator runs, when
`refresh_due(kid)` says so: the set was never fetched, is older than
jwks.endpoint.refresh.ms, or the token names a key id the set lacks (at most
once a minute per key id, as Kafka's RefreshingHttpsJwks). A failed fetch
keeps the old keys and is logged; the token then fails as Kafka's does.

`validate_jwt` is Kafka's ValidatorAccessTokenValidator: a signed JWT (never
alg "none"), `exp` and `iat` required, `nbf` honoured, issuer and audience when
configured, all with sasl.oauthbearer.clock.skew.seconds; the subject from
sasl.oauthbearer.sub.claim.name. Signatures are joserfc's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from zonegate.proxy.auth.listener import OAuthSettings
from zonegate.runtime.clock import Clock

log = logging.getLogger(__name__)

# Asymmetric signatures only: a JWKS publishes public keys (Kafka allows any but "none").
ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
    "Ed25519",  # RFC 9864's name for EdDSA over Ed25519
)  # fmt: skip
_MISSING_KID_INTERVAL_MS = 60_000  # Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
_MISSING_KID_ENTRIES = 16  # Kafka's MISSING_KEY_ID_CACHE_MAX_ENTRIES
_MAX_KID_LENGTH = 1000  # Kafka's MISSING_KEY_ID_MAX_KEY_LENGTH
_FETCH_TIMEOUT_S = 10.0

Fetch = Callable[[str], Awaitable[bytes]]


class InvalidToken(Exception):
    """The token is refused; the message is logged, the client sees invalid_token."""


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal: str  # the subject claim, trimmed
    expires_ms: int  # exp, milliseconds since the epoch
    scopes: frozenset[str]


async def _urllib_fetch(url: str) -> bytes:
    def get() -> bytes:
        with urllib.request.urlopen(url, timeout=_FETCH_TIMEOUT_S) as answer:  # noqa: S310
            body: bytes = answer.read()
            return body

    return await asyncio.to_thread(get)


class JwksKeys:
    def __init__(self, settings: OAuthSettings, clock: Clock, fetch: Fetch | None = None) -> None:
        self.settings = settings
        self._clock = clock
        self._fetch = fetch or _urllib_fetch
        self._keys = KeySet([])
        self._fetched_ms: int | None = None
        self._missing: OrderedDict[str, int] = OrderedDict()  # kid -> when last refreshed for it
        self._inflight: asyncio.Task[None] | None = None
        self._backoff_ms = 0  # after failed fetches: Kafka's retry.backoff.ms, doubling to max
        self._retry_at_ms = 0
        self.fetches = 0  # attempts, for tests and metrics

    @property
    def key_set(self) -> KeySet:
        return self._keys

    def load(self, jwks_json: bytes | str) -> None:
        """Replaces the keys by those of a JWKS document (ValueError if it is not one)."""
        try:
            doc = json.loads(jwks_json)
            keys = KeySet.import_key_set(doc)
        except (ValueError, TypeError, KeyError, JoseError) as exc:
            raise ValueError(f"not a JWKS document: {exc}") from None
        self._keys = keys
        self._fetched_ms = self._clock.wall_ms()

    def knows(self, kid: str | None) -> bool:
        if kid is None:
            return bool(self._keys.keys)
        return any(k.kid == kid for k in self._keys)

    def refresh_due(self, kid: str | None) -> bool:
        now = self._clock.wall_ms()
        if now < self._retry_at_ms:
            return False  # the endpoint failed a moment ago: keep to the backoff
        if self._fetched_ms is None:
            return True
        if now - self._fetched_ms >= self.settings.jwks_endpoint_refresh_ms:
            return True
        if kid is None or self.knows(kid) or len(kid) > _MAX_KID_LENGTH:
            return False
        last = self._missing.get(kid)
        return last is None or now - last >= _MISSING_KID_INTERVAL_MS

    async def refresh(self, kid: str | None = None) -> None:
        """Fetches the key set; callers waiting at the same time share one fetch."""
        if kid is not None and not self.knows(kid):
            self._missing[kid] = self._clock.wall_ms()
            self._missing.move_to_end(kid)
            while len(self._missing) > _MISSING_KID_ENTRIES:
                self._missing.popitem(last=False)
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(self._refresh())
        await asyncio.shield(self._inflight)

    async def _refresh(self) -> None:
        url = self.settings.jwks_endpoint_url
        self.fetches += 1
        try:
            self.load(await self._fetch(url))
        except Exception as exc:  # the endpoint's fault: keep the old keys, back off
            s = self.settings
            self._backoff_ms = min(
                max(self._backoff_ms * 2, s.jwks_endpoint_retry_backoff_ms),
                s.jwks_endpoint_retry_backoff_max_ms,
            )
            self._retry_at_ms = self._clock.wall_ms() + self._backoff_ms
            log.warning("could not refresh the JWKS from %s: %s", url, exc)
        else:
            self._backoff_ms = 0
            self._retry_at_ms = 0


def token_kid(token: str) -> str | None:
    """The key id in a compact JWS's header, unverified (None if absent or unreadable)."""
    try:
        header = jws.extract_compact(token.encode()).protected
    except (JoseError, ValueError, UnicodeError):
        return None
    kid = header.get("kid")
    return kid if isinstance(kid, str) else None


def validate_jwt(token: str, keys: KeySet, settings: OAuthSettings, now_ms: int) -> ValidToken:
    if token.count(".") != 2:
        raise InvalidToken(
            "Malformed JWT provided; expected three sections (header, payload, signature)"
        )
    try:
        obj = jws.extract_compact(token.encode())
        alg = obj.protected.get("alg")
        if alg not in ALGORITHMS:
            raise InvalidToken(f"JWS algorithm {alg!r} is not allowed")
        kid = obj.protected.get("kid")
        candidates = [k for k in keys if kid is None or k.kid == kid]
        if not candidates:
            raise InvalidToken(f"no key with kid {kid!r} in the JWKS")
        verified = None
        for key in candidates:
            try:
                verified = jws.deserialize_compact(token, key, algorithms=list(ALGORITHMS))
                break
            except JoseError:
                continue
        if verified is None:
            raise InvalidToken("JWT signature does not verify with the JWKS's keys")
        claims = json.loads(verified.payload)
    except (JoseError, ValueError, UnicodeError) as exc:
        raise InvalidToken(f"Could not validate the access token: {exc}") from None
    if not isinstance(claims, dict):
        raise InvalidToken("the JWT's payload is not a JSON object")
    return _check_claims(claims, settings, now_ms)


def _numeric(claims: dict[str, Any], name: str, required: bool) -> int | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"No {name} claim present")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"The {name} claim is not a number")
    return int(value)


def _check_claims(claims: dict[str, Any], settings: OAuthSettings, now_ms: int) -> ValidToken:
    now = now_ms // 1000
    skew = settings.clock_skew_seconds
    exp = _numeric(claims, "exp", True)
    iat = _numeric(claims, "iat", True)
    nbf = _numeric(claims, "nbf", False)
    assert exp is not None and iat is not None
    if exp < 0 or iat < 0:
        raise InvalidToken("exp and iat must not be negative")
    if now >= exp + skew:
        raise InvalidToken(f"The JWT is no longer valid: exp {exp}, now {now}, skew {skew}s")
    if nbf is not None and now + skew < nbf:
        raise InvalidToken(f"The JWT is not yet valid: nbf {nbf}, now {now}, skew {skew}s")
    if settings.expected_issuer is not None and claims.get("iss") != settings.expected_issuer:
        raise InvalidToken(f"Issuer {claims.get('iss')!r} is not {settings.expected_issuer!r}")
    if settings.expected_audience:
        aud = claims.get("aud")
        auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(a in settings.expected_audience for a in auds):
            raise InvalidToken(f"Audience {aud!r} is none of {list(settings.expected_audience)}")
    sub = claims.get(settings.sub_claim_name)
    if not isinstance(sub, str) or not sub.strip():
        raise InvalidToken(f"The {settings.sub_claim_name} claim is missing or empty")
    raw_scope = claims.get(settings.scope_claim_name)
    scopes: list[Any] = (
        [raw_scope] if isinstance(raw_scope, str) else list(raw_scope or [])
        if isinstance(raw_scope, list) else []
    )  # fmt: skip
    if any(not isinstance(s, str) or not s.strip() for s in scopes):
        raise InvalidToken(f"The {settings.scope_claim_name} claim has an empty scope")
    return ValidToken(sub.strip(), exp * 1000, frozenset(s.strip() for s in scopes))
