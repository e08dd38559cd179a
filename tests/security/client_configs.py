"""One login, written as each client wants it: confluent-kafka, kafka-python, aiokafka,
kcat and Apache Kafka's Java client.

A `Login` says how to reach one listener: its security protocol, the CA to trust, a
client certificate for mutual TLS, and a SASL mechanism with a user and password or a
token. Each builder returns exactly the settings a user of that client would write, so
the tests show that Kafka users' client settings work unchanged.

OAUTHBEARER: confluent-kafka gets the token from `oauth_cb`, kafka-python and aiokafka
from their `sasl_oauth_token_provider`, the Java client from the test issuer's token
endpoint through Kafka's OAuthBearerLoginCallbackHandler. kcat can fetch its own from
that endpoint (librdkafka's `sasl.oauthbearer.method=oidc`) only where its librdkafka
was built with libcurl, which Debian's kcat 1.7.1 is not; without `oidc` it sends
librdkafka's unsecured JWT, which the tests use as a token that must be refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tests.security.certs import ClientCert

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@dataclass(frozen=True)
class Oidc:
    """A token endpoint and the client credentials for it (client-credentials grant)."""

    token_url: str
    client_id: str
    client_secret: str


@dataclass(frozen=True)
class Login:
    bootstrap: str
    protocol: str  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ca: Path | None = None
    client_cert: ClientCert | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    token: Callable[[], str] | None = None  # OAUTHBEARER for the Python clients
    oidc: Oidc | None = None  # OAUTHBEARER for kcat and the Java client

    def but(self, **changes: Any) -> Login:
        return replace(self, **changes)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


# -- confluent-kafka (librdkafka's names) -----------------------------------------
def confluent(login: Login) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": login.bootstrap,
        "security.protocol": login.protocol.lower(),
    }
    conf.update(_librdkafka_tls(login))
    if login.sasl:
        conf["sasl.mechanism"] = login.mechanism
        if login.mechanism == "OAUTHBEARER":
            if login.token is not None:
                token = login.token

                def oauth_cb(_config: str) -> tuple[str, float]:
                    return token(), time.time() + 300

                conf["oauth_cb"] = oauth_cb
            else:
                conf.update(_librdkafka_oidc(login))
        else:
            conf["sasl.username"] = login.username
            conf["sasl.password"] = login.password
    return conf


def _librdkafka_tls(login: Login) -> dict[str, str]:
    conf: dict[str, str] = {}
    if login.tls:
        if login.ca is not None:
            conf["ssl.ca.location"] = str(login.ca)
        if login.client_cert is not None:
            conf["ssl.certificate.location"] = str(login.client_cert.cert)
            conf["ssl.key.location"] = str(login.client_cert.key)
    return conf


def _librdkafka_oidc(login: Login) -> dict[str, str]:
    assert login.oidc is not None, "OAUTHBEARER without a token or a token endpoint"
    return {
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": login.oidc.token_url,
        "sasl.oauthbearer.client.id": login.oidc.client_id,
        "sasl.oauthbearer.client.secret": login.oidc.client_secret,
        "sasl.oauthbearer.scope": "kafka",
    }


# -- kcat: librdkafka's names as -X options ----------------------------------------
def kcat_args(login: Login) -> list[str]:
    conf: dict[str, str] = {"security.protocol": login.protocol.lower()}
    conf.update(_librdkafka_tls(login))
    if login.sasl:
        conf["sasl.mechanism"] = str(login.mechanism)
        if login.mechanism == "OAUTHBEARER" and login.oidc is not None:
            conf.update(_librdkafka_oidc(login))
        elif login.mechanism == "OAUTHBEARER":
            # librdkafka's development mode: an unsecured (unsigned) JWT for this subject,
            # which a node checking signatures must refuse.
            conf["sasl.oauthbearer.config"] = f"principal={login.username}"
            conf["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
        else:
            conf["sasl.username"] = str(login.username)
            conf["sasl.password"] = str(login.password)
    args = ["-b", login.bootstrap]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    return args


# -- kafka-python ------------------------------------------------------------------
def kafka_python(login: Login) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap_servers": login.bootstrap,
        "security_protocol": login.protocol,
    }
    if login.tls:
        conf["ssl_cafile"] = str(login.ca) if login.ca else None
        if login.client_cert is not None:
            conf["ssl_certfile"] = str(login.client_cert.cert)
            conf["ssl_keyfile"] = str(login.client_cert.key)
    if login.sasl:
        conf["sasl_mechanism"] = login.mechanism
        if login.mechanism == "OAUTHBEARER":
            from kafka.net.sasl.oauth import AbstractTokenProvider

            assert login.token is not None
            token = login.token

            class Provider(AbstractTokenProvider):  # type: ignore[misc]
                def token(self) -> str:
                    return token()

            conf["sasl_oauth_token_provider"] = Provider()
        else:
            conf["sasl_plain_username"] = login.username
            conf["sasl_plain_password"] = login.password
    return conf


# -- aiokafka ----------------------------------------------------------------------
def aiokafka(login: Login) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap_servers": login.bootstrap,
        "security_protocol": login.protocol,
    }
    if login.tls:
        from aiokafka.helpers import create_ssl_context

        cert = login.client_cert
        conf["ssl_context"] = create_ssl_context(
            cafile=str(login.ca) if login.ca else None,
            certfile=str(cert.cert) if cert else None,
            keyfile=str(cert.key) if cert else None,
        )
    if login.sasl:
        conf["sasl_mechanism"] = login.mechanism
        if login.mechanism == "OAUTHBEARER":
            from aiokafka.abc import AbstractTokenProvider

            assert login.token is not None
            token = login.token

            class Provider(AbstractTokenProvider):  # type: ignore[misc]
                async def token(self) -> str:
                    return token()

            conf["sasl_oauth_token_provider"] = Provider()
        else:
            conf["sasl_plain_username"] = login.username
            conf["sasl_plain_password"] = login.password
    return conf


# -- Apache Kafka's Java client (and the kafka-* tools' --command-config) ----------
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


def java(login: Login) -> dict[str, str]:
    """Java client properties. TLS material as PEM files (ssl.*.type=PEM)."""
    props: dict[str, str] = {"security.protocol": login.protocol}
    if login.tls:
        if login.ca is not None:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = str(login.ca)
        if login.client_cert is not None:
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(login.client_cert.pem)
    if login.sasl:
        mechanism = str(login.mechanism)
        props["sasl.mechanism"] = mechanism
        module = _LOGIN_MODULES[mechanism]
        if mechanism == "OAUTHBEARER":
            assert login.oidc is not None
            props["sasl.jaas.config"] = (
                f'{module} required clientId="{login.oidc.client_id}" '
                f'clientSecret="{login.oidc.client_secret}" scope="kafka";'
            )
            props["sasl.oauthbearer.token.endpoint.url"] = login.oidc.token_url
            props["sasl.login.callback.handler.class"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            )
        else:
            props["sasl.jaas.config"] = (
                f'{module} required username="{login.username}" password="{login.password}";'
            )
    return props


def java_args(login: Login) -> list[str]:
    """The Java properties as ClientDriver's trailing key=value arguments."""
    return [f"{k}={v}" for k, v in java(login).items()]


def java_properties_file(login: Login, path: Path) -> Path:
    """The Java properties as a file, for the kafka-* tools' --command-config."""
    path.write_text("".join(f"{k}={v}\n" for k, v in java(login).items()))
    return path
