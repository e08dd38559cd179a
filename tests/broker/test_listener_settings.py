"""Kafka's listener settings as a Kafka user's server.properties has them: listeners,
the protocol map, advertised.listeners, ssl.*, sasl.* and the listener.name.<name>.
overrides; what cannot be honoured is refused at start by name, in one line."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from zonegate.broker.cli import build_parser
from zonegate.broker.config import NodeConfig
from zonegate.broker.config_file import resolve
from zonegate.broker.listeners import listener_security
from zonegate.broker.serve_cli import config_from_args, serve_configs
from zonegate.broker.startup import StartupError

pytestmark = pytest.mark.unit

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
    '    username="admin" \\\n'
    '    password="admin-secret" \\\n'
    '    user_admin="admin-secret" \\\n'
    '    user_alice="alice-secret";\n'
)
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"


def _config(tmp_path: Path, text: str, command: str = "node", *argv: str) -> NodeConfig:
    conf = tmp_path / "server.properties"
    conf.write_text(text)
    args = build_parser().parse_args([command, "--config", str(conf), *argv])
    resolve(args, args.settings, {})
    return config_from_args(args)


def _refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(StartupError) as refused:
        _config(tmp_path, text)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_kafka_server_properties_lines_work_as_they_are(tmp_path: Path) -> None:
    c = _config(
        tmp_path,
        "listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093\n"
        "ssl.keystore.type=PEM\n"
        "ssl.keystore.location=/etc/kafka/server.pem\n"
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/etc/kafka/ca.pem\n"
        "ssl.client.auth=requested\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}"
        f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}",
    )
    assert (c.host, c.port) == ("127.0.0.1", 9092)
    plain, sasl_ssl = c.kafka_listeners
    assert (plain.name, plain.protocol, plain.tls) == ("PLAINTEXT", "PLAINTEXT", None)
    assert (sasl_ssl.name, sasl_ssl.protocol, sasl_ssl.port) == ("SASL_SSL", "SASL_SSL", 9093)
    assert sasl_ssl.tls is not None
    assert sasl_ssl.tls.keystore == Path("/etc/kafka/server.pem")
    assert sasl_ssl.tls.truststore == Path("/etc/kafka/ca.pem")
    assert sasl_ssl.tls.client_auth == "requested"
    assert sasl_ssl.tls.protocols == ("TLSv1.2", "TLSv1.3")
    assert sasl_ssl.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    security = listener_security(sasl_ssl)
    assert dict(security.plain_users) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert security.failed_auth_delay_ms == 100 and security.reauth_ms == 0


def test_host_port_is_one_plaintext_listener_as_before(tmp_path: Path) -> None:
    for text in ("listeners=127.0.0.1:9200\n", "listeners=PLAINTEXT://127.0.0.1:9200\n"):
        c = _config(tmp_path, text)
        assert (c.host, c.port, c.listeners) == ("127.0.0.1", 9200, ())
        (only,) = c.kafka_listeners
        assert (only.name, only.protocol) == ("PLAINTEXT", "PLAINTEXT")
    assert _config(tmp_path, "listeners=PLAINTEXT://:9092\n").host == "0.0.0.0"


def test_names_of_their_own_protocol_map_and_advertised_listeners(tmp_path: Path) -> None:
    c = _config(
        tmp_path,
        "listeners=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094\n"
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SSL\n"
        "advertised.listeners=EXTERNAL://kafka.example.com:19094\n"
        "advertised.host.name=node-1.internal\n"
        "ssl.keystore.type=PEM\n"
        "listener.name.external.ssl.keystore.location=/certs/external.pem\n"
        "listener.name.external.ssl.enabled.protocols=TLSv1.3\n",
    )
    internal, external = c.kafka_listeners
    assert (internal.name, internal.protocol, internal.advertised_host) == (
        "INTERNAL",
        "PLAINTEXT",
        None,
    )
    assert c.advertised_host == "node-1.internal"  # the listeners advertised.listeners skips
    assert (external.protocol, external.advertised_host, external.advertised_port) == (
        "SSL",
        "kafka.example.com",
        19094,
    )
    assert external.tls is not None and external.tls.protocols == ("TLSv1.3",)
    assert external.tls.keystore == Path("/certs/external.pem")


def test_serve_puts_each_zone_on_each_port_plus_i(tmp_path: Path) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(
        "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9192\n"
        "advertised.listeners=SSL://lb.example.com:19192\n"
        "ssl.keystore.type=PEM\nssl.keystore.location=/certs/server.pem\n"
    )
    args = build_parser().parse_args(
        ["serve", "--config", str(conf), "--data-dir", str(tmp_path / "d")]
    )
    resolve(args, args.settings, {})
    ports = [[(s.port, s.advertised_port) for s in c.kafka_listeners] for c in serve_configs(args)]
    assert ports == [
        [(9092, None), (9192, 19192)],
        [(9093, None), (9193, 19193)],
        [(9094, None), (9194, 19194)],
    ]


def test_flags_and_environment_set_them_too(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["node", "--listen", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"]
    )
    env = {
        "ZONEGATE_SSL_KEYSTORE_TYPE": "PEM",
        "ZONEGATE_SSL_KEYSTORE_LOCATION": "/certs/server.pem",
        "ZONEGATE_LISTENER_SETTING": "listener.name.ssl.ssl.client.auth=required\n"
        "listener.name.ssl.ssl.truststore.type=PEM\n"
        "listener.name.ssl.ssl.truststore.location=/certs/ca.pem",
    }
    resolve(args, args.settings, env)
    ssl_listener = config_from_args(args).kafka_listeners[1]
    assert ssl_listener.tls is not None
    assert ssl_listener.tls.client_auth == "required"
    assert ssl_listener.tls.truststore == Path("/certs/ca.pem")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("listeners=SSL://:9093\nssl.keystore.location=/k.jks\n", "ssl.keystore.type=JKS"),
        (
            # PKCS12 is read (proxy/keystores.py); Kafka wants its password
            "listeners=SSL://:9093\nssl.keystore.type=PKCS12\nssl.keystore.location=/k.p12\n",
            "SSL key store is specified, but key store password is not specified.",
        ),
        (
            "listeners=SSL://:9093\nssl.keystore.type=PKCS12\nssl.keystore.location=/k.p12\n"
            "ssl.keystore.password=secret\nssl.truststore.location=/t.jks\n",
            "ssl.truststore.type=JKS: Java's own keystore format is not read (no well-kept "
            "Python library reads it): convert it with keytool",
        ),
        ("listeners=SSL://:9093\nssl.keystore.type=PEM\n", "ssl.keystore.location"),
        ("listeners=CLIENT://:9093\n", "listener.security.protocol.map"),
        ("listeners=PLAINTEXT://:9092,PLAINTEXT://:9093\n", "named twice"),
        ("listeners=SASL_PLAINTEXT://:9092\n", "GSSAPI"),
        (
            "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=PLAIN\n",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=OAUTHBEARER\n",
            "sasl.oauthbearer.jwks.endpoint.url",
        ),
        (
            "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=PLAIN\n"
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={SCRAM_JAAS}",
            "PlainLoginModule",
        ),
        ("listeners=PLAINTEXT://:9092\nlistener.name.other.ssl.client.auth=required\n", "OTHER"),
        (
            "listeners=PLAINTEXT://:9092\nlistener.name.plaintext.log.retention.ms=1\n",
            "listener.name.plaintext.log.retention.ms",
        ),
        (
            "listeners=SSL://:9093\nssl.keystore.type=PEM\nssl.keystore.location=/k.pem\n"
            "ssl.enabled.protocols=TLSv1.1\n",
            "ssl.enabled.protocols",
        ),
        (
            "listeners=SSL://:9093\nssl.keystore.type=PEM\nssl.keystore.location=/k.pem\n"
            "ssl.principal.mapping.rules=RULE:nonsense\n",
            "ssl.principal.mapping.rules",
        ),
        ("advertised.listeners=OTHER://h:1\n", "OTHER"),
        (
            "listeners=SASL_SSL://:9093\nsasl.enabled.mechanisms=OAUTHBEARER\n"
            "ssl.keystore.type=PEM\nssl.keystore.location=/k.pem\n"
            "sasl.oauthbearer.jwks.endpoint.url=https://idp/jwks\n"
            "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=my.Handler\n",
            "my.Handler",
        ),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(tmp_path: Path, text: str, named: str) -> None:
    assert named in _refused(tmp_path, text)


def test_oauthbearer_settings_reach_the_listener_security(tmp_path: Path) -> None:
    c = _config(
        tmp_path,
        "listeners=SASL_PLAINTEXT://:9092\n"
        "sasl.enabled.mechanisms=OAUTHBEARER\n"
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n"
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;\n"
        "sasl.oauthbearer.jwks.endpoint.url=https://idp.example.com/jwks\n"
        "sasl.oauthbearer.expected.audience=kafka,zonegate\n"
        "listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer=https://idp.example.com\n"
        "connections.max.reauth.ms=60000\n"
        "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms=30000\n"
        "connection.failed.authentication.delay.ms=250\n",
    )
    security = listener_security(c.kafka_listeners[0])
    assert security.reauth_ms_for("OAUTHBEARER") == 30000
    assert security.oauth is not None
    assert security.oauth.jwks_endpoint_url == "https://idp.example.com/jwks"
    assert security.oauth.expected_audience == ("kafka", "zonegate")
    assert security.oauth.expected_issuer == "https://idp.example.com"
    assert (security.reauth_ms, security.failed_auth_delay_ms) == (60000, 250)


def test_a_plain_node_config_is_unchanged(tmp_path: Path) -> None:
    c = _config(tmp_path, "node.id=3\n")
    assert c.listeners == ()
    assert dataclasses.replace(c, node_id=1) == NodeConfig(c.data_dir)


def test_serve_refuses_listeners_whose_zone_ports_collide(tmp_path: Path) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(
        "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093\n"
        "ssl.keystore.type=PEM\nssl.keystore.location=/certs/server.pem\n"
    )
    args = build_parser().parse_args(
        ["serve", "--config", str(conf), "--data-dir", str(tmp_path / "d")]
    )
    resolve(args, args.settings, {})
    with pytest.raises(StartupError, match="port 9093 would be both zone zone-a's listener SSL"):
        serve_configs(args)


def test_a_listener_whose_certificate_cannot_load_stops_the_node_with_one_line(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={tmp_path / 'missing.pem'}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "zonegate", "node", "--config", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0] == (
        f"zonegate node: listener SSL: ssl.keystore.location '{tmp_path / 'missing.pem'}': "
        "no such file"
    )
