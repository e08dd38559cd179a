"""The JWT checks of OAUTHBEARER (Kafka's ValidatorAccessTokenValidator) and the JWKS
read from its endpoint (a file: URL here, through the same urllib path as https)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OKPKey, RSAKey

from tests.proxy.auth.sasl_clients import TokenIssuer, oauth_settings
from zonegate.proxy.auth import JwksKeys, OAuthSettings, validate_jwt
from zonegate.proxy.auth.jwks import InvalidToken
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit

NOW_S = 1_700_000_000
CLAIMS = {"sub": "svc", "iat": NOW_S, "exp": NOW_S + 60}


def _settings() -> OAuthSettings:
    return OAuthSettings(jwks_endpoint_url="file:///unused")


@pytest.mark.parametrize(
    ("alg", "key"),
    [
        ("ES256", ECKey.generate_key("P-256", parameters={"kid": "e"})),
        ("PS256", TokenIssuer("p").key),
        ("RS512", TokenIssuer("r").key),
        ("Ed25519", OKPKey.generate_key("Ed25519", parameters={"kid": "o"})),
    ],
)
def test_asymmetric_algorithms_verify(alg: str, key: ECKey | RSAKey | OKPKey) -> None:
    token = jwt.encode({"alg": alg, "kid": key.kid}, CLAIMS, key, algorithms=[alg])
    public = KeySet.import_key_set(KeySet([key]).as_dict(private=False))
    valid = validate_jwt(token, public, _settings(), NOW_S * 1000)
    assert (valid.principal, valid.expires_ms) == ("svc", (NOW_S + 60) * 1000)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_unsigned_token_is_refused() -> None:
    header = _b64(json.dumps({"alg": "none"}).encode())
    token = f"{header}.{_b64(json.dumps(CLAIMS).encode())}."
    with pytest.raises(InvalidToken, match="not allowed"):
        validate_jwt(token, KeySet([TokenIssuer().key]), _settings(), NOW_S * 1000)


def test_hmac_token_is_refused() -> None:
    # a JWKS holds public keys: a token "signed" with a shared secret is not accepted
    header = _b64(json.dumps({"alg": "HS256", "kid": "key-1"}).encode())
    token = f"{header}.{_b64(json.dumps(CLAIMS).encode())}.{_b64(b'x' * 32)}"
    with pytest.raises(InvalidToken, match="not allowed"):
        validate_jwt(token, KeySet([TokenIssuer().key]), _settings(), NOW_S * 1000)


@pytest.mark.parametrize("token", ["", "a.b", "a.b.c", "...", "x.y.z.w"])
def test_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(InvalidToken):
        validate_jwt(token, KeySet([TokenIssuer().key]), _settings(), NOW_S * 1000)


def test_custom_subject_claim_and_any_expected_audience() -> None:
    issuer = TokenIssuer()
    settings = OAuthSettings(
        jwks_endpoint_url="file:///unused",
        expected_audience=("a", "kafka"),
        sub_claim_name="client_id",
    )
    token = issuer.token(NOW_S * 1000, aud=["other", "kafka"], client_id=" svc-7 ")
    assert validate_jwt(token, KeySet([issuer.key]), settings, NOW_S * 1000).principal == "svc-7"
    missing = issuer.token(NOW_S * 1000, aud="kafka")
    with pytest.raises(InvalidToken, match="client_id"):
        validate_jwt(missing, KeySet([issuer.key]), settings, NOW_S * 1000)


def test_scopes_from_the_scope_claim() -> None:
    issuer = TokenIssuer()
    token = issuer.token(NOW_S * 1000, scope=["read", "write"])
    valid = validate_jwt(token, KeySet([issuer.key]), oauth_settings(), NOW_S * 1000)
    assert valid.scopes == {"read", "write"}


def test_jwks_read_from_a_file_url_and_refreshed_when_stale(tmp_path: Path) -> None:
    issuer, rotated = TokenIssuer(), TokenIssuer("key-2")
    path = tmp_path / "jwks.json"
    path.write_bytes(issuer.jwks())
    clock = ManualClock()
    keys = JwksKeys(oauth_settings(url=path.as_uri(), jwks_endpoint_refresh_ms=60_000), clock)
    assert keys.refresh_due(None)
    asyncio.run(keys.refresh())
    assert keys.knows("key-1") and not keys.knows("key-2")
    assert not keys.refresh_due("key-1")
    path.write_bytes(rotated.jwks())
    asyncio.run(clock.advance(60))
    assert keys.refresh_due("key-1")  # older than jwks.endpoint.refresh.ms
    asyncio.run(keys.refresh())
    assert keys.knows("key-2") and not keys.knows("key-1")


def test_a_broken_document_keeps_the_keys(tmp_path: Path) -> None:
    issuer = TokenIssuer()
    path = tmp_path / "jwks.json"
    path.write_bytes(issuer.jwks())
    keys = JwksKeys(oauth_settings(url=path.as_uri()), ManualClock())
    asyncio.run(keys.refresh())
    path.write_text("{not json")
    asyncio.run(keys.refresh())
    assert keys.knows("key-1") and keys.fetches == 2
