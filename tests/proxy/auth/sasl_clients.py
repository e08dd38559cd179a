"""Real credentials for the authenticator's tests: SCRAM keys derived by scramp, JWTs
signed by joserfc with a test key pair whose public half is the JWKS."""

from __future__ import annotations

import json
from functools import cache

import scramp
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey

from zonegate.proxy.auth import OAuthSettings
from zonegate.services.credentials import ScramCredential

ISSUER = "https://issuer.test"
AUDIENCE = "kafka"


class ScramUsers:
    """A ScramCredentialSource holding what AlterUserScramCredentials would store."""

    def __init__(self) -> None:
        self._creds: dict[tuple[str, str], ScramCredential] = {}

    def add(self, user: str, password: str, mechanism: str, iterations: int = 4096) -> None:
        salt, stored, server, i = scramp.ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=iterations
        )
        self._creds[(user, mechanism)] = ScramCredential(mechanism, salt, stored, server, i)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._creds.get((user, mechanism))


@cache
def _signing_key(kid: str, generation: int) -> RSAKey:
    # RSA key generation is slow; tests share a key per (kid, generation)
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig"})


class TokenIssuer:
    """An identity provider: a signing key and the JWKS that publishes its public half.
    `generation` tells apart two keys that carry the same kid (a forger's)."""

    def __init__(self, kid: str = "key-1", generation: int = 0) -> None:
        self.key = _signing_key(kid, generation)
        self.kid = kid

    def jwks(self, *extra: RSAKey | ECKey) -> bytes:
        return json.dumps(KeySet([self.key, *extra]).as_dict(private=False)).encode()

    def token(self, now_ms: int, lifetime_s: int = 3600, **claims: object) -> str:
        now = now_ms // 1000
        body: dict[str, object] = {
            "sub": "alice",
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "exp": now + lifetime_s,
            "scope": "kafka",
        }
        body.update(claims)
        for name in [k for k, v in body.items() if v is None]:
            del body[name]
        header = {"alg": "RS256", "kid": self.kid}
        return jwt.encode(header, body, self.key)


def oauth_settings(url: str = "file:///jwks.json", **kw: object) -> OAuthSettings:
    args: dict[str, object] = {
        "jwks_endpoint_url": url,
        "expected_audience": (AUDIENCE,),
        "expected_issuer": ISSUER,
    }
    args.update(kw)
    return OAuthSettings(**args)  # type: ignore[arg-type]


def oauth_first(token: str, authzid: str = "") -> bytes:
    """The client's first message (RFC 7628), as Kafka's OAuthBearerClientInitialResponse."""
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}\x01\x01".encode()
