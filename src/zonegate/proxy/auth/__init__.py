"""Authentication of a Kafka connection, sans-IO, beside the codec (issue 25).

Bytes and events in, decisions out; no socket, no task, no sleep here. How a
server drives it, one `ConnectionAuth` per accepted connection:

    auth = ConnectionAuth(security, scram_source, jwks_keys, clock, tls_principal)
      security: the listener's ListenerSecurity; jwks_keys: one JwksKeys per listener
      with OAUTHBEARER (shared by its connections), else None; tls_principal: on
      SSL / SASL_SSL with a client certificate, map_principal(security.principal_rules,
      distinguished_name(peer_cert_der)) (a NoMatchingRule closes the connection, as
      Kafka fails to build the principal), else None.

    For every Kafka request, in arrival order, before its handler:
      d = auth.admits(api_key, api_version)
      if not d.serve: log d.reason (with the client's address), wait d.delay_ms,
        answer with d.error_code if set and you can, and close.
      else: ctx = RequestContext(..., principal=auth.principal, auth=auth); handle.
    While not auth.authenticated, handle one request at a time (Kafka mutes the
    channel during authentication): the SASL handlers move the state on.

    After a SaslHandshake / SaslAuthenticate answer is built: if auth.failed, log
    auth.failure_log_line(peer address) at INFO (Kafka's line, naming the mechanism),
    wait auth.failure_delay_ms, send the answer, close
    (connection.failed.authentication.delay.ms).

    While auth.raw_mode (after SaslHandshake v0), each frame is a raw SASL token:
      await auth.prepare(frame); step = auth.raw_token(frame)
      if step.failed: wait step.delay_ms and close without answering (Kafka's way);
      else: write len(step.reply) as 4 bytes big-endian, then step.reply.

    KIP-368: admits() closes an expired session at its next request itself;
    auth.expired(now_ms) says so too, for a server that wants to check on its own.
"""

from zonegate.proxy.auth.connection import (
    ANONYMOUS,
    SERVE,
    AuthStep,
    ConnectionAuth,
    Decision,
    State,
)
from zonegate.proxy.auth.jaas import JaasConfig, parse_jaas, parse_jaas_entries
from zonegate.proxy.auth.jwks import JwksKeys, ValidToken, validate_jwt
from zonegate.proxy.auth.listener import (
    OAUTHBEARER,
    PLAIN,
    PROTOCOLS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SUPPORTED_MECHANISMS,
    ListenerSecurity,
    OAuthSettings,
)
from zonegate.proxy.auth.principal_rules import (
    NoMatchingRule,
    PrincipalRule,
    distinguished_name,
    map_principal,
    parse_principal_rules,
)

__all__ = [
    "ANONYMOUS",
    "OAUTHBEARER",
    "PLAIN",
    "PROTOCOLS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "SERVE",
    "SUPPORTED_MECHANISMS",
    "AuthStep",
    "ConnectionAuth",
    "Decision",
    "JaasConfig",
    "JwksKeys",
    "ListenerSecurity",
    "NoMatchingRule",
    "OAuthSettings",
    "PrincipalRule",
    "State",
    "ValidToken",
    "distinguished_name",
    "map_principal",
    "parse_jaas",
    "parse_jaas_entries",
    "parse_principal_rules",
    "validate_jwt",
]
