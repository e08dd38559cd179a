"""What a listener needs to authenticate its connections: one `ListenerGate` per listener
makes each connection's `ConnectionAuth` (proxy/auth), with the principal of the
client certificate on TLS listeners, and frames the answers to raw SASL tokens.

The listener's protocol (proxy/server.py) asks the connection's ConnectionAuth
before every request (`admits`) and after every SASL answer (`failed`); this module
holds what is the same for all connections of a listener.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from zonegate.proxy.auth import (
    ConnectionAuth,
    JwksKeys,
    ListenerSecurity,
    NoMatchingRule,
    map_principal,
)
from zonegate.runtime.clock import Clock
from zonegate.services.credentials import ScramCredentialSource

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
# The `api_key` under which a raw SASL token (after SaslHandshake v0) waits for its
# answer among the connection's requests: no Kafka API has it.
RAW_TOKEN = -1


class CertificateRefused(Exception):
    """The client certificate's subject matches no ssl.principal.mapping.rules rule."""


@dataclass(frozen=True)
class ListenerGate:
    security: ListenerSecurity
    scram: ScramCredentialSource
    keys: JwksKeys | None  # listeners with OAUTHBEARER: its JWKS, shared by connections
    clock: Clock

    def connection(self, peer_dn: str | None) -> ConnectionAuth:
        """A new connection's authentication; `peer_dn` the client certificate's subject
        (RFC 2253), mapped by the listener's rules (CertificateRefused when none matches,
        as Kafka fails to build the principal and closes)."""
        principal = None
        if peer_dn is not None:
            try:
                principal = map_principal(self.security.principal_rules, peer_dn)
            except NoMatchingRule as exc:
                raise CertificateRefused(str(exc)) from None
        return ConnectionAuth(self.security, self.scram, self.keys, self.clock, principal)


def raw_token_frame(reply: bytes) -> bytes:
    """A raw SASL token as Kafka sends it after SaslHandshake v0: 4-byte size, bytes."""
    return struct.pack(">i", len(reply)) + reply
