"""Kafka's listener, TLS and SASL settings: their rows (settings.py adds them to
SETTINGS) and the types of their values. broker/listeners.py turns the values into
one `ListenerSpec` per listener, as Kafka reads `listeners`,
`listener.security.protocol.map`, `advertised.listeners` and the
`listener.name.<name>.` overrides.

Lines of a Kafka `server.properties` work as they are. A setting or value zonegate
cannot honour (a JKS keystore, GSSAPI, a listener without its TLS files) is refused
at start by name, with one line; those describing parts zonegate does not have
(the inter-broker ones) are taken with no effect (inter_broker.py).
"""

from __future__ import annotations

import argparse
import re

from zonegate.broker.setting_types import MS, MS_POSITIVE, Setting

PROTOCOL_NAMES = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's default listener.security.protocol.map (KafkaConfig).
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# The one server callback handler KIP-768 names for validating JWTs against a JWKS.
OAUTH_VALIDATORS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
OAUTH_KEYS = (
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
)
# Kafka's defaults of the KIP-768 settings, for the help: the auth package applies them.
OAUTH_DEFAULTS = {
    "sasl.oauthbearer.jwks.endpoint.url": "none; OAUTHBEARER needs it",
    "sasl.oauthbearer.expected.issuer": "none: any issuer",
    "sasl.oauthbearer.expected.audience": "none: any audience",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.clock.skew.seconds": "30",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10000",
}
# Settings a `listener.name.<name>.` prefix may override, as Kafka allows (its
# listener-configurable ssl.* and sasl.* settings).
PER_LISTENER = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.protocol",
    "ssl.cipher.suites",
    "ssl.principal.mapping.rules",
    "sasl.enabled.mechanisms",
    "connections.max.reauth.ms",
    "ssl.endpoint.identification.algorithm",  # no effect: inter_broker.py
    *OAUTH_KEYS,
)
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


# -- value types -------------------------------------------------------------------------


def _endpoint(text: str, what: str) -> tuple[str, str, int]:
    """NAME://HOST:PORT (HOST may be empty: every address; [v6] in brackets)."""
    m = re.fullmatch(r"([^:/]+)://(\[[^\]]*\]|[^:]*):(\d+)", text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{what}: expected NAME://HOST:PORT, got {text!r}")
    name, host, port = m.group(1), m.group(2).strip("[]"), int(m.group(3))
    if not _NAME.match(name) or port > 65535:
        raise argparse.ArgumentTypeError(f"{what}: expected NAME://HOST:PORT, got {text!r}")
    return name.upper(), host, port


def listeners(text: str) -> tuple[tuple[str, str, int], ...]:
    """Kafka's `listeners` (NAME://HOST:PORT,...), or zonegate's HOST:PORT (one PLAINTEXT
    listener); an empty host listens on every address."""
    if "://" not in text:
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise argparse.ArgumentTypeError(
                f"expected HOST:PORT or NAME://HOST:PORT,..., got {text!r}"
            )
        return (("PLAINTEXT", host or "0.0.0.0", int(port)),)
    found = [_endpoint(part, "listeners") for part in text.split(",") if part.strip()]
    names = [n for n, _, _ in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"listener {twice[0]} is named twice")
    return tuple((n, h or "0.0.0.0", p) for n, h, p in found)


listeners.__name__ = "listeners"


def advertised(text: str) -> tuple[tuple[str, str, int], ...]:
    return tuple(_endpoint(p, "advertised.listeners") for p in text.split(",") if p.strip())


def protocol_map(text: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, protocol = part.partition(":")
        if not sep or not _NAME.match(name) or protocol.upper() not in PROTOCOL_NAMES:
            raise argparse.ArgumentTypeError(
                f"expected NAME:PROTOCOL,... with PROTOCOL one of {', '.join(PROTOCOL_NAMES)}; "
                f"got {part!r}"
            )
        pairs.append((name.upper(), protocol.upper()))
    return tuple(pairs)


def names(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def overrides(text: str) -> tuple[tuple[str, str], ...]:
    """`listener.name.<name>.<setting>=value` lines (the config file's keys, or the lines
    of --listener-setting / its environment variable)."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.startswith("listener.name."):
            raise argparse.ArgumentTypeError(
                f"expected listener.name.NAME.SETTING=VALUE lines, got {line!r}"
            )
        found.append((key, value.strip()))
    return tuple(found)


overrides.__name__ = "lines"


def _inter_broker_protocol(text: str) -> str:
    """security.inter.broker.protocol: one of Kafka's four, in any case (its
    SecurityProtocol.forName), else Kafka's message."""
    protocol = text.strip().upper()
    if protocol not in PROTOCOL_NAMES:
        raise argparse.ArgumentTypeError(
            f"Invalid security protocol `{text.strip()}` defined in security.inter.broker.protocol"
        )
    return protocol


_inter_broker_protocol.__name__ = "protocol"

_SSL_HELP = " (a listener's own: listener.name.NAME.{key})"
# Kafka's passwords of PKCS12 stores and its inline PEM (proxy/keystores.py).
_STORE_SECRETS = (
    ("ssl.keystore.password", "PASSWORD", "the password of a PKCS12 ssl.keystore.location"),
    (
        "ssl.keystore.key",
        "PEM",
        "the private key as PEM text, in place of a file, with ssl.keystore.type=PEM and "
        "ssl.keystore.certificate.chain (encrypted: ssl.key.password)",
    ),
    ("ssl.keystore.certificate.chain", "PEM", "the certificate chain of ssl.keystore.key, PEM"),
    ("ssl.truststore.password", "PASSWORD", "the password of a PKCS12 ssl.truststore.location"),
    (
        "ssl.truststore.certificates",
        "PEM",
        "the CA certificates as PEM text, in place of ssl.truststore.location, with "
        "ssl.truststore.type=PEM",
    ),
)

SECURITY_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "--listen",
        "listeners",
        (("PLAINTEXT", "127.0.0.1", 9092),),
        "Kafka listeners, Kafka's NAME://HOST:PORT,... (e.g. PLAINTEXT://:9092,"
        "SASL_SSL://:9093; an empty host: every address) or HOST:PORT, one PLAINTEXT "
        "listener (default 127.0.0.1:9092)",
        listeners,
        "LISTENERS",
        into=("host", "port"),
        convert=lambda found: found[0][1:],  # the first listener's; listeners_from_args: all
        serve_help="Kafka listeners of the first zone's node, NAME://HOST:PORT,... or "
        "HOST:PORT; zone i's node listens on each PORT+i (default 127.0.0.1:9092, so 9092, "
        "9093, 9094; port 0: any free ports)",
    ),
    Setting(
        "--listener-security-protocol-map",
        "listener.security.protocol.map",
        protocol_map(DEFAULT_PROTOCOL_MAP),
        "listener.security.protocol.map: each listener name's protocol, NAME:PROTOCOL,... "
        f"(default Kafka's, {DEFAULT_PROTOCOL_MAP})",
        protocol_map,
        "NAME:PROTOCOL,...",
        into=None,
    ),
    Setting(
        "--advertised-listeners",
        "advertised.listeners",
        (),
        "advertised.listeners: the NAME://HOST:PORT clients are told of, per listener "
        "(default: each listener's own port at the advertised host); on `serve`, zone i's "
        "ports are PORT+i",
        advertised,
        "LISTENERS",
        into=None,
    ),
    Setting(
        "--advertised-host",
        "advertised.host.name",
        None,
        "advertised.host.name: the host name clients are told of in Metadata for the "
        "listeners advertised.listeners does not name (default: the listener's host)",
        metavar="HOST",
    ),
    Setting(
        "--ssl-keystore-type",
        "ssl.keystore.type",
        "JKS",
        "ssl.keystore.type: PEM or PKCS12 (Kafka's default, JKS, is refused: no well-kept "
        "Python library reads it; convert it with keytool -importkeystore -deststoretype "
        "PKCS12)" + _SSL_HELP.format(key="ssl.keystore.type"),
        metavar="TYPE",
        into=None,
    ),
    Setting(
        "--ssl-keystore-location",
        "ssl.keystore.location",
        None,
        "ssl.keystore.location: the file of the private key and its certificate chain (PEM: "
        "both in one file; PKCS12: a store ssl.keystore.password opens); re-read when it "
        "changes (default: none; a TLS listener needs it)"
        + _SSL_HELP.format(key="ssl.keystore.location"),
        metavar="FILE",
        into=None,
    ),
    Setting(
        "--ssl-key-password",
        "ssl.key.password",
        None,
        "ssl.key.password: the password of an encrypted private key (default: none)"
        + _SSL_HELP.format(key="ssl.key.password"),
        metavar="PASSWORD",
        into=None,
    ),
    Setting(
        "--ssl-truststore-type",
        "ssl.truststore.type",
        "JKS",
        "ssl.truststore.type: PEM or PKCS12 (Kafka's default, JKS, is refused, as "
        "ssl.keystore.type)" + _SSL_HELP.format(key="ssl.truststore.type"),
        metavar="TYPE",
        into=None,
    ),
    Setting(
        "--ssl-truststore-location",
        "ssl.truststore.location",
        None,
        "ssl.truststore.location: the file of the CA certificates client certificates are "
        "checked against, PEM or PKCS12; re-read when it changes (default: none)"
        + _SSL_HELP.format(key="ssl.truststore.location"),
        metavar="FILE",
        into=None,
    ),
    *(
        Setting(
            "--" + key.replace(".", "-"),
            key,
            None,
            f"{key}: {what} (default: none)" + _SSL_HELP.format(key=key),
            metavar=metavar,
            into=None,
        )
        for key, metavar, what in _STORE_SECRETS
    ),
    Setting(
        "--ssl-client-auth",
        "ssl.client.auth",
        "none",
        "ssl.client.auth: none, requested or required (default {default})"
        + _SSL_HELP.format(key="ssl.client.auth"),
        choices=("none", "requested", "required"),
        into=None,
    ),
    Setting(
        "--ssl-enabled-protocols",
        "ssl.enabled.protocols",
        "TLSv1.2,TLSv1.3",
        "ssl.enabled.protocols: of TLSv1.2 and TLSv1.3 (default {default})"
        + _SSL_HELP.format(key="ssl.enabled.protocols"),
        metavar="PROTOCOL,...",
        into=None,
    ),
    Setting(
        "--ssl-protocol",
        "ssl.protocol",
        "TLSv1.3",
        "ssl.protocol: TLSv1.2, TLSv1.3 or TLS (Java's name of the context; the versions "
        "offered are ssl.enabled.protocols; default {default})"
        + _SSL_HELP.format(key="ssl.protocol"),
        metavar="PROTOCOL",
        into=None,
    ),
    Setting(
        "--ssl-cipher-suites",
        "ssl.cipher.suites",
        "",
        "ssl.cipher.suites: the TLS 1.2 suites offered, Java's or OpenSSL's names; TLS "
        "1.3's three suites all or none (default: OpenSSL's)"
        + _SSL_HELP.format(key="ssl.cipher.suites"),
        metavar="SUITE,...",
        into=None,
    ),
    Setting(
        "--ssl-principal-mapping-rules",
        "ssl.principal.mapping.rules",
        "DEFAULT",
        "ssl.principal.mapping.rules: how a client certificate's subject (RFC 2253) becomes "
        "the principal's name, Kafka's RULE:pattern/replacement/[LU],...,DEFAULT "
        "(default {default}: the whole subject)"
        + _SSL_HELP.format(key="ssl.principal.mapping.rules"),
        metavar="RULES",
        into=None,
    ),
    Setting(
        "--ssl-handshake-timeout-ms",
        "zonegate.ssl.handshake.timeout.ms",
        10_000,
        "a TLS handshake not finished this long after the connection opened is closed "
        "(one WARNING; default {default})",
        **MS_POSITIVE,
    ),
    Setting(
        "--sasl-enabled-mechanisms",
        "sasl.enabled.mechanisms",
        "GSSAPI",
        "sasl.enabled.mechanisms of SASL listeners: of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
        "and OAUTHBEARER (default Kafka's, GSSAPI, which is refused: name the mechanisms)"
        + _SSL_HELP.format(key="sasl.enabled.mechanisms"),
        metavar="MECHANISM,...",
        into=None,
    ),
    Setting(
        "--connections-max-reauth-ms",
        "connections.max.reauth.ms",
        0,
        "connections.max.reauth.ms (KIP-368): a SASL session lasts at most this long, and a "
        "connection that has not authenticated again by then is closed at its next request "
        "(default {default}: no limit)" + _SSL_HELP.format(key="connections.max.reauth.ms"),
        into=None,
        **MS,
    ),
    Setting(
        "--connection-failed-authentication-delay-ms",
        "connection.failed.authentication.delay.ms",
        100,
        "connection.failed.authentication.delay.ms: how long the answer to a failed "
        "authentication waits before the connection closes (default {default})",
        into=None,
        **MS,
    ),
    *(
        Setting(
            "--" + key.replace(".", "-"),
            key,
            None,
            f"{key} (KIP-768: OAUTHBEARER tokens validated against a JWKS, docs/security.md; "
            f"default {OAUTH_DEFAULTS[key]})" + _SSL_HELP.format(key=key),
            metavar="VALUE",
            into=None,
        )
        for key in OAUTH_KEYS
    ),
    # Kafka's inter-broker settings: checked as Kafka checks them, shown, with no effect
    # (nodes call each other over the leader RPC; broker/inter_broker.py).
    Setting(
        "--inter-broker-listener-name",
        "inter.broker.listener.name",
        None,
        "inter.broker.listener.name: no effect (nodes do not speak Kafka to each other; "
        "their RPC takes zonegate.rpc.ssl.*), checked as Kafka checks it: a listener's name, "
        "not with security.inter.broker.protocol (default: none)",
        metavar="NAME",
        into=None,
    ),
    Setting(
        "--security-inter-broker-protocol",
        "security.inter.broker.protocol",
        None,
        "security.inter.broker.protocol: no effect (as inter.broker.listener.name), "
        "checked as Kafka checks it: one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL with "
        "a listener of that name (default: none; Kafka's is PLAINTEXT)",
        type=_inter_broker_protocol,
        metavar="PROTOCOL",
        into=None,
    ),
    Setting(
        "--sasl-mechanism-inter-broker-protocol",
        "sasl.mechanism.inter.broker.protocol",
        None,
        "sasl.mechanism.inter.broker.protocol: no effect (as inter.broker.listener.name); "
        "when the inter-broker listener is a SASL one, one of its sasl.enabled.mechanisms, "
        "as Kafka checks (default: none; Kafka's is GSSAPI)",
        metavar="MECHANISM",
        into=None,
    ),
    Setting(
        "--ssl-endpoint-identification-algorithm",
        "ssl.endpoint.identification.algorithm",
        None,
        "ssl.endpoint.identification.algorithm: no effect (a Kafka broker checks the names "
        "in other brokers' certificates with it; nodes check each other's RPC certificates "
        "by zonegate.rpc.ssl.*) (default: none; Kafka's is https)"
        + _SSL_HELP.format(key="ssl.endpoint.identification.algorithm"),
        metavar="ALGORITHM",
        into=None,
    ),
    Setting(
        "--listener-setting",
        "listener.name.*",
        (),
        "a listener's own settings, Kafka's listener.name.<name>.<setting>=value keys (the "
        "name in lower case), e.g. listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config; "
        "on the command line and in the environment, such lines, one per line (default: "
        "none)",
        overrides,
        "LINES",
        into=None,
    ),
)
