"""What one listener asks of its clients: its security protocol, SASL mechanisms and their settings.

One frozen `ListenerSecurity` per listener, built once from the node's settings
(Kafka's names: listener.security.protocol.map, sasl.enabled.mechanisms,
listener.name.<name>.<mechanism>.sasl.jaas.config, connections.max.reauth.ms,
connection.failed.authentication.delay.ms, ssl.principal.mapping.rules and
KIP-768's sasl.oauthbearer.* settings). Every connection of the listener reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from zonegate.proxy.auth.principal_rules import PrincipalRule, parse_principal_rules

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """KIP-768's broker settings (sasl.oauthbearer.*), Kafka's defaults."""

    jwks_endpoint_url: str  # sasl.oauthbearer.jwks.endpoint.url (https://, http:// or file://)
    jwks_endpoint_refresh_ms: int = 3_600_000  # sasl.oauthbearer.jwks.endpoint.refresh.ms
    jwks_endpoint_retry_backoff_ms: int = 100  # ...jwks.endpoint.retry.backoff.ms
    jwks_endpoint_retry_backoff_max_ms: int = 10_000  # ...jwks.endpoint.retry.backoff.max.ms
    expected_audience: tuple[str, ...] = ()  # sasl.oauthbearer.expected.audience (any of)
    expected_issuer: str | None = None  # sasl.oauthbearer.expected.issuer
    sub_claim_name: str = "sub"  # sasl.oauthbearer.sub.claim.name
    scope_claim_name: str = "scope"  # sasl.oauthbearer.scope.claim.name
    clock_skew_seconds: int = 30  # sasl.oauthbearer.clock.skew.seconds


def _frozen(users: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(users))


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One listener's security. `mechanisms` is sasl.enabled.mechanisms (in the order
    the SaslHandshake answer lists them); `plain_users` the `user_NAME="password"`
    options of the listener's PLAIN JAAS line (`parse_jaas(...).plain_users`);
    `reauth_ms` connections.max.reauth.ms (0: no limit but the credential's own);
    `failed_auth_delay_ms` connection.failed.authentication.delay.ms."""

    name: str
    protocol: str
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)
    oauth: OAuthSettings | None = None
    reauth_ms: int = 0
    failed_auth_delay_ms: int = 100
    principal_rules: tuple[PrincipalRule, ...] = field(
        default_factory=lambda: parse_principal_rules("DEFAULT")
    )
    # listener.name.<name>.<mechanism>.connections.max.reauth.ms, where set (Kafka's
    # per-mechanism override of reauth_ms)
    reauth_ms_by_mechanism: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown security protocol {self.protocol!r} of listener {self.name}")
        unknown = [m for m in self.mechanisms if m not in SUPPORTED_MECHANISMS]
        if self.sasl and unknown:
            raise ValueError(
                f"listener {self.name}: SASL mechanism(s) {', '.join(unknown)} not supported; "
                f"supported: {', '.join(SUPPORTED_MECHANISMS)}"
            )
        if self.sasl and not self.mechanisms:
            raise ValueError(f"listener {self.name}: sasl.enabled.mechanisms is empty")
        if self.sasl and OAUTHBEARER in self.mechanisms and self.oauth is None:
            raise ValueError(
                f"listener {self.name}: OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url"
            )
        object.__setattr__(self, "plain_users", _frozen(self.plain_users))
        object.__setattr__(
            self, "reauth_ms_by_mechanism", MappingProxyType(dict(self.reauth_ms_by_mechanism))
        )

    def reauth_ms_for(self, mechanism: str) -> int:
        return self.reauth_ms_by_mechanism.get(mechanism, self.reauth_ms)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")
