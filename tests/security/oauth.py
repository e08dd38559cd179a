"""An OAuth 2 issuer on loopback: a JWKS endpoint the node validates tokens against, a
token endpoint for clients that fetch their own (librdkafka's `sasl.oauthbearer.method=oidc`,
so kcat), and a minter for tests that hand a token to a client directly.

Tokens are JWTs signed with RS256 by joserfc, with Kafka's claims (KIP-768): `sub`, `iss`,
`aud`, `iat`, `exp`. `foreign_key` signs tokens with a key the JWKS does not hold; the
token endpoint hands out such a token at /token/foreign (for clients that fetch their own).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

ISSUER = "https://issuer.zonegate.test"
AUDIENCE = "zonegate"
CLIENT_ID = "kcat-client"
CLIENT_SECRET = "kcat-secret"


class TokenIssuer:
    """Signs tokens; serves its public key set at /jwks.json and client-credentials tokens
    at /token (HTTP Basic CLIENT_ID:CLIENT_SECRET), on 127.0.0.1 in a thread of its own."""

    def __init__(self) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": "zonegate-test-1"})
        self.foreign_key = RSAKey.generate_key(2048, parameters={"kid": "zonegate-test-1"})
        self.jwks_requests = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path != "/jwks.json":
                    self.send_error(404)
                    return
                issuer.jwks_requests += 1
                self._json(KeySet([issuer.key]).as_dict(private=False))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(length)
                expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
                if self.path not in ("/token", "/token/foreign") or self.headers.get(
                    "Authorization"
                ) != (f"Basic {expected}"):
                    self.send_error(401)
                    return
                token = issuer.mint("kcat-user", foreign=self.path == "/token/foreign")
                self._json({"access_token": token, "token_type": "bearer", "expires_in": 300})

            def _json(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep the test output to the test's

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks.json"

    @property
    def token_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def start(self) -> TokenIssuer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def mint(
        self,
        subject: str,
        lifetime_s: float = 300,
        *,
        issuer: str = ISSUER,
        audience: str = AUDIENCE,
        foreign: bool = False,
    ) -> str:
        """A signed JWT for `subject`; a negative lifetime gives one already expired."""
        now = int(time.time())
        claims = {
            "sub": subject,
            "iss": issuer,
            "aud": audience,
            "iat": now - 5 if lifetime_s > 0 else now - 600,
            "exp": int(now + lifetime_s),
            "scope": "kafka",
        }
        key = self.foreign_key if foreign else self.key
        return jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "JWT"}, claims, key)
