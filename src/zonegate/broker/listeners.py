"""Kafka's listeners, resolved: one `ListenerSpec` per listener from the settings of
security_settings.py (`listeners_from_args`), as Kafka reads `listeners`,
`listener.security.protocol.map`, `advertised.listeners`, the top-level ssl.* and
sasl.* settings and their `listener.name.<name>.` overrides; and each listener's
`ListenerSecurity` for the connections' authentication (proxy/auth).

A setting or value zonegate cannot honour (a JKS keystore, GSSAPI, a listener
without its TLS files, a JAAS line naming another login module) is refused at
start by name, with one line (ListenerSettingsError).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zonegate.broker import inter_broker
from zonegate.broker.security_settings import (
    MECHANISMS,
    OAUTH_KEYS,
    OAUTH_VALIDATORS,
    PER_LISTENER,
    names,
)
from zonegate.proxy.auth import ListenerSecurity, OAuthSettings, parse_jaas, parse_principal_rules
from zonegate.proxy.auth.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
)
from zonegate.proxy.tls import PROTOCOLS, TlsSettings


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """One Kafka listener, all its settings resolved."""

    name: str  # as written in `listeners`, upper case by Kafka's convention
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    host: str
    port: int
    advertised_host: str | None = None  # None: the node's advertised host
    advertised_port: int | None = None  # None: the port it listens on
    tls: TlsSettings | None = None
    mechanisms: tuple[str, ...] = ()
    jaas: Mapping[str, str] = field(default_factory=dict)  # mechanism -> sasl.jaas.config
    oauth: Mapping[str, str] = field(default_factory=dict)  # sasl.oauthbearer.* values
    reauth_ms: int = 0  # connections.max.reauth.ms
    # listener.name.<name>.<mechanism>.connections.max.reauth.ms, where given
    reauth_ms_by_mechanism: Mapping[str, int] = field(default_factory=dict)
    failed_auth_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    principal_rules: str = "DEFAULT"  # ssl.principal.mapping.rules

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


class ListenerSettingsError(ValueError):
    """A listener setting that cannot be honoured; the message names it."""


_JKS_REASON = (
    "Java's own keystore format is not read (no well-kept Python library reads it): "
    "convert it with keytool -importkeystore -srckeystore FILE.jks -destkeystore FILE.p12 "
    "-deststoretype PKCS12 and set {key}=PKCS12, or use PEM"
)


def _store_type(value: str, key: str) -> str:
    kind = str(value).upper()
    if kind == "JKS":
        raise ListenerSettingsError(f"{key}=JKS: " + _JKS_REASON.format(key=key))
    if kind not in ("PEM", "PKCS12"):
        raise ListenerSettingsError(f"{key}={value}: expected PEM or PKCS12")
    return kind


def _keystore(args: argparse.Namespace, own: dict[str, str], where: str) -> dict[str, Any]:
    """The keystore settings, combined as Kafka's DefaultSslEngineFactory.createKeystore
    allows, with its messages."""
    kind = str(_own(args, own, "ssl.keystore.type")).upper()
    location = _own(args, own, "ssl.keystore.location") or None
    password = _own(args, own, "ssl.keystore.password") or None
    key = _own(args, own, "ssl.keystore.key") or None
    chain = _own(args, own, "ssl.keystore.certificate.chain") or None
    refusal = None
    if key is not None:
        if kind != "PEM":
            refusal = (
                f"SSL private key can be specified only for PEM, but key store type is {kind}."
            )
        elif chain is None:
            refusal = "SSL private key is specified, but certificate chain is not specified."
        elif location is not None:
            refusal = "Both SSL key store location and separate private key are specified."
        elif password is not None:
            refusal = (
                "SSL key store password cannot be specified with PEM format, only key "
                "password may be specified."
            )
    elif chain is not None:
        refusal = "SSL certificate chain is specified, but private key is not specified"
    elif location is None:
        refusal = (
            "names no ssl.keystore.location (the key and its certificate chain: a PEM file, "
            "a PKCS12 store, or ssl.keystore.key with ssl.keystore.certificate.chain)"
            if password is None
            else "SSL key store is not specified, but key store password is specified."
        )
    elif _store_type(kind, "ssl.keystore.type") == "PEM" and password is not None:
        refusal = (
            "SSL key store password cannot be specified with PEM format, only key password "
            "may be specified"
        )
    elif kind == "PKCS12" and password is None:
        refusal = "SSL key store is specified, but key store password is not specified."
    if refusal is not None:
        raise ListenerSettingsError(f"{where} uses TLS: {refusal}")
    return {
        "keystore": Path(location) if location else None,
        "keystore_type": kind,
        "keystore_password": password,
        "keystore_key": key,
        "keystore_certificate_chain": chain,
    }


def _truststore(args: argparse.Namespace, own: dict[str, str], where: str) -> dict[str, Any]:
    """The truststore settings, as Kafka's createTruststore allows, with its messages."""
    kind = str(_own(args, own, "ssl.truststore.type")).upper()
    location = _own(args, own, "ssl.truststore.location") or None
    password = _own(args, own, "ssl.truststore.password") or None
    certificates = _own(args, own, "ssl.truststore.certificates") or None
    refusal = None
    if certificates is not None:
        if kind != "PEM":
            refusal = (
                "SSL trust store certs can be specified only for PEM, but trust store type is "
                f"{kind}."
            )
        elif location is not None:
            refusal = "Both SSL trust store location and separate trust certificates are specified."
        elif password is not None:
            refusal = "SSL trust store password cannot be specified for PEM format."
    elif location is None:
        if password is not None:
            refusal = "SSL trust store is not specified, but trust store password is specified."
    elif _store_type(kind, "ssl.truststore.type") == "PEM" and password is not None:
        refusal = "SSL trust store password cannot be specified for PEM format."
    if refusal is not None:
        raise ListenerSettingsError(f"{where} uses TLS: {refusal}")
    return {
        "truststore": Path(location) if location else None,
        "truststore_type": kind,
        "truststore_password": password,
        "truststore_certificates": certificates,
    }


def _own(args: argparse.Namespace, prefix: dict[str, str], key: str) -> Any:
    """A listener's value of `key`: its `listener.name.<name>.` override, else the
    top-level setting's value."""
    if key in prefix:
        return prefix[key]
    return getattr(args, key.replace(".", "_").replace("-", "_"))


def _tls(args: argparse.Namespace, own: dict[str, str], name: str) -> TlsSettings:
    where = f"listener {name}"
    stores = {**_keystore(args, own, where), **_truststore(args, own, where)}
    protocols = names(_own(args, own, "ssl.enabled.protocols"))
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown or not protocols:
        raise ListenerSettingsError(
            f"ssl.enabled.protocols={','.join(protocols)}: only TLSv1.2 and TLSv1.3 are offered"
        )
    context_protocol = _own(args, own, "ssl.protocol")
    if context_protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise ListenerSettingsError(
            f"ssl.protocol={context_protocol}: only TLS, TLSv1.2 and TLSv1.3 are offered"
        )
    if context_protocol == "TLSv1.2":  # Java's TLSv1.2 context never speaks TLS 1.3
        protocols = tuple(p for p in protocols if p != "TLSv1.3")
        if not protocols:
            raise ListenerSettingsError(
                f"listener {name}: ssl.protocol=TLSv1.2 with ssl.enabled.protocols=TLSv1.3 "
                "leaves no protocol"
            )
    client_auth = _own(args, own, "ssl.client.auth")
    if client_auth not in ("none", "requested", "required"):
        raise ListenerSettingsError(
            f"ssl.client.auth={client_auth}: expected none, requested or required"
        )
    return TlsSettings(
        key_password=_own(args, own, "ssl.key.password") or None,
        **stores,
        client_auth=client_auth,
        protocols=protocols,
        cipher_suites=names(_own(args, own, "ssl.cipher.suites")),
    )


def _split_overrides(
    lines: tuple[tuple[str, str], ...], names: set[str]
) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """{listener: {setting: value}} and {listener: {mechanism: jaas}} from the
    `listener.name.` lines; a key Kafka does not allow, or naming no listener, refused."""
    settings: dict[str, dict[str, str]] = {}
    jaas: dict[str, dict[str, str]] = {}
    for key, value in lines:
        rest = key.removeprefix("listener.name.")
        listener, _, setting = rest.partition(".")
        if listener.upper() not in names:
            raise ListenerSettingsError(f"{key}: no listener is named {listener.upper()}")
        listener = listener.upper()
        mechanism, _, tail = setting.partition(".")
        if tail == "sasl.jaas.config" and mechanism.upper() in MECHANISMS:
            jaas.setdefault(listener, {})[mechanism.upper()] = value
        elif tail == "connections.max.reauth.ms" and mechanism.upper() in MECHANISMS:
            # Kafka's per-mechanism override, kept under the mechanism's own name.
            settings.setdefault(listener, {})[f"{mechanism.upper()}.{tail}"] = value
        elif mechanism == "oauthbearer" and tail == "sasl.server.callback.handler.class":
            if value not in OAUTH_VALIDATORS:
                raise ListenerSettingsError(
                    f"{key}={value}: only Kafka's OAuthBearerValidatorCallbackHandler (JWTs "
                    "checked against sasl.oauthbearer.jwks.endpoint.url) is offered"
                )
        elif mechanism == "oauthbearer" and tail in OAUTH_KEYS:
            settings.setdefault(listener, {})[tail] = value
        elif setting in PER_LISTENER:
            settings.setdefault(listener, {})[setting] = value
        else:
            raise ListenerSettingsError(
                f"{key} is not a setting a listener can have (listener.name.NAME. takes "
                f"{', '.join(PER_LISTENER[:12])}, the sasl.oauthbearer.* settings, "
                "MECHANISM.sasl.jaas.config and MECHANISM.connections.max.reauth.ms)"
            )
    return settings, jaas


def _sasl(
    args: argparse.Namespace, own: dict[str, str], jaas: dict[str, str], name: str
) -> dict[str, Any]:
    mechanisms = tuple(m.upper() for m in names(_own(args, own, "sasl.enabled.mechanisms")))
    refused = [m for m in mechanisms if m not in MECHANISMS]
    if refused or not mechanisms:
        raise ListenerSettingsError(
            f"listener {name}: sasl.enabled.mechanisms={','.join(mechanisms)}: "
            f"{', '.join(refused) or 'none'} not offered; name some of {', '.join(MECHANISMS)}"
        )
    for mechanism in mechanisms:
        if mechanism != "OAUTHBEARER" and mechanism not in jaas:
            raise ListenerSettingsError(
                f"listener {name} enables {mechanism} and has no "
                f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
            )
    oauth = {k: str(_own(args, own, k)) for k in OAUTH_KEYS if _own(args, own, k) is not None}
    if "OAUTHBEARER" in mechanisms and "sasl.oauthbearer.jwks.endpoint.url" not in oauth:
        raise ListenerSettingsError(
            f"listener {name} enables OAUTHBEARER and names no "
            "sasl.oauthbearer.jwks.endpoint.url (unsigned tokens are never accepted)"
        )
    return {"mechanisms": mechanisms, "jaas": jaas, "oauth": oauth}


def _ms(value: object, name: str) -> int:
    try:
        ms = int(str(value))
    except ValueError:
        ms = -1
    if ms < 0:
        raise ListenerSettingsError(
            f"listener {name}: connections.max.reauth.ms={value}: expected a number of ms >= 0"
        )
    return ms


def listeners_from_args(args: argparse.Namespace) -> tuple[ListenerSpec, ...]:
    """Every listener with its protocol, advertised endpoint, TLS and SASL settings;
    ListenerSettingsError names the first setting that cannot be honoured."""
    declared: tuple[tuple[str, str, int], ...] = args.listen
    protocols = dict(args.listener_security_protocol_map)
    names = {n for n, _, _ in declared}
    ads = {n: (h, p) for n, h, p in args.advertised_listeners}
    for n in ads:
        if n not in names:
            raise ListenerSettingsError(f"advertised.listeners names {n}, not in listeners")
    per, jaas = _split_overrides(args.listener_setting, names)
    specs = []
    for name, host, port in declared:
        if name not in protocols:
            raise ListenerSettingsError(
                f"listener {name} has no protocol: add {name}:PROTOCOL to "
                "listener.security.protocol.map"
            )
        protocol = protocols[name]
        own = per.get(name, {})
        spec: dict[str, Any] = {}
        if protocol in ("SSL", "SASL_SSL"):
            spec["tls"] = _tls(args, own, name)
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            spec.update(_sasl(args, own, jaas.get(name, {}), name))
        elif name in jaas:
            raise ListenerSettingsError(
                f"listener {name} is {protocol}: its sasl.jaas.config would never be used"
            )
        ad_host, ad_port = ads.get(name, (None, None))
        specs.append(
            ListenerSpec(
                name=name,
                protocol=protocol,
                host=host,
                port=port,
                advertised_host=ad_host or None,
                advertised_port=ad_port,
                reauth_ms=_ms(_own(args, own, "connections.max.reauth.ms"), name),
                reauth_ms_by_mechanism={
                    key.split(".", 1)[0]: _ms(value, name)
                    for key, value in own.items()
                    if key.endswith(".connections.max.reauth.ms")
                    and key.split(".", 1)[0] in MECHANISMS
                },
                failed_auth_delay_ms=args.connection_failed_authentication_delay_ms,
                principal_rules=_own(args, own, "ssl.principal.mapping.rules"),
                **spec,
            )
        )
    for made in specs:
        listener_security(made)  # its JAAS lines and rules parse, or refused here
    inter_broker.check(
        args, [(s.name, s.protocol) for s in specs], {s.name: s.mechanisms for s in specs}
    )
    return tuple(specs)


# -- what the listener asks of its clients (proxy/auth) ------------------------------------

_LOGIN_MODULES = {
    "PLAIN": PLAIN_LOGIN_MODULE,
    "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
    "SCRAM-SHA-512": SCRAM_LOGIN_MODULE,
    "OAUTHBEARER": OAUTHBEARER_LOGIN_MODULE,
}


def _oauth(values: Mapping[str, str], name: str) -> OAuthSettings | None:
    if "sasl.oauthbearer.jwks.endpoint.url" not in values:
        return None

    def number(key: str, default: int) -> int:
        text = values.get(key)
        if text is None:
            return default
        try:
            return int(text)
        except ValueError:
            raise ListenerSettingsError(
                f"listener {name}: {key}={text}: expected a number"
            ) from None

    audience = values.get("sasl.oauthbearer.expected.audience")
    return OAuthSettings(
        jwks_endpoint_url=values["sasl.oauthbearer.jwks.endpoint.url"],
        jwks_endpoint_refresh_ms=number("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000),
        jwks_endpoint_retry_backoff_ms=number(
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100
        ),
        jwks_endpoint_retry_backoff_max_ms=number(
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10_000
        ),
        expected_audience=names(audience) if audience else (),
        expected_issuer=values.get("sasl.oauthbearer.expected.issuer") or None,
        sub_claim_name=values.get("sasl.oauthbearer.sub.claim.name") or "sub",
        scope_claim_name=values.get("sasl.oauthbearer.scope.claim.name") or "scope",
        clock_skew_seconds=number("sasl.oauthbearer.clock.skew.seconds", 30),
    )


def listener_security(spec: ListenerSpec) -> ListenerSecurity:
    """The listener's ListenerSecurity (proxy/auth): its JAAS lines and principal rules
    parsed; ListenerSettingsError names what Kafka would refuse too."""
    where = f"listener {spec.name}"
    plain_users: Mapping[str, str] = {}
    for mechanism, text in spec.jaas.items():
        key = f"listener.name.{spec.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
        try:
            jaas = parse_jaas(text)
        except ValueError as exc:
            raise ListenerSettingsError(f"{key}: {exc}") from None
        if jaas.login_module != _LOGIN_MODULES[mechanism]:
            raise ListenerSettingsError(
                f"{key}: {mechanism} takes {_LOGIN_MODULES[mechanism]}, not {jaas.login_module}"
            )
        if mechanism == "PLAIN":
            plain_users = jaas.plain_users
    try:
        rules = parse_principal_rules(spec.principal_rules)
    except ValueError as exc:
        raise ListenerSettingsError(
            f"{where}: ssl.principal.mapping.rules={spec.principal_rules}: {exc}"
        ) from None
    try:
        return ListenerSecurity(
            name=spec.name,
            protocol=spec.protocol,
            mechanisms=spec.mechanisms,
            plain_users=plain_users,
            oauth=_oauth(spec.oauth, spec.name),
            reauth_ms=spec.reauth_ms,
            reauth_ms_by_mechanism=spec.reauth_ms_by_mechanism,
            failed_auth_delay_ms=spec.failed_auth_delay_ms,
            principal_rules=rules,
        )
    except ValueError as exc:
        raise ListenerSettingsError(str(exc)) from None
