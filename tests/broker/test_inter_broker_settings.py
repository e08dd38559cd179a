"""Kafka's inter-broker settings and ssl.endpoint.identification.algorithm in a Kafka
operator's server.properties: accepted and shown with no effect, their values refused
with KafkaConfig's messages where Kafka refuses them (broker/inter_broker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.test_listener_settings import PLAIN_JAAS, SCRAM_JAAS, _config, _refused

pytestmark = pytest.mark.unit

LISTENERS = (
    "listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093,INTERNAL://127.0.0.1:9094\n"
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
    "INTERNAL:SASL_PLAINTEXT\n"
    "ssl.keystore.type=PEM\n"
    "ssl.keystore.location=/etc/kafka/server.pem\n"
    "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
    f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}"
    f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}"
    f"listener.name.internal.plain.sasl.jaas.config={PLAIN_JAAS}"
    f"listener.name.internal.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}"
)


def test_an_operators_inter_broker_lines_are_accepted_and_shown(tmp_path: Path) -> None:
    c = _config(
        tmp_path,
        LISTENERS + "inter.broker.listener.name=internal\n"
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
        "ssl.endpoint.identification.algorithm=\n"
        "listener.name.sasl_ssl.ssl.endpoint.identification.algorithm=https\n",
    )
    shown = c.broker_configs()
    assert shown["inter.broker.listener.name"] == "INTERNAL"
    assert shown["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert shown["ssl.endpoint.identification.algorithm"] == ""
    assert shown["listener.name.sasl_ssl.ssl.endpoint.identification.algorithm"] == "https"
    # no effect: the listeners are what they were
    assert [s.name for s in c.kafka_listeners] == ["PLAINTEXT", "SASL_SSL", "INTERNAL"]


def test_security_inter_broker_protocol_naming_a_listener(tmp_path: Path) -> None:
    c = _config(tmp_path, LISTENERS + "security.inter.broker.protocol=plaintext\n")
    assert c.broker_configs()["security.inter.broker.protocol"] == "PLAINTEXT"


def test_unset_they_show_nothing_and_need_no_plaintext_listener(tmp_path: Path) -> None:
    """Kafka's default inter-broker listener is PLAINTEXT; a zonegate node needs none,
    so only what is set is checked."""
    c = _config(
        tmp_path,
        "listeners=SASL_SSL://127.0.0.1:9093\n"
        "ssl.keystore.type=PEM\nssl.keystore.location=/etc/kafka/server.pem\n"
        f"sasl.enabled.mechanisms=PLAIN\nlistener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
    )
    assert not any("inter.broker" in k for k in c.broker_configs())


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            "inter.broker.listener.name=INTERNAL\nsecurity.inter.broker.protocol=SASL_PLAINTEXT\n",
            "Only one of inter.broker.listener.name and security.inter.broker.protocol "
            "should be set.",
        ),
        (
            "inter.broker.listener.name=REPLICATION\n",
            "Listener with name REPLICATION defined in inter.broker.listener.name not found "
            "in listener.security.protocol.map.",
        ),
        (
            "security.inter.broker.protocol=SSL\n",
            "inter.broker.listener.name must be a listener name defined in "
            "advertised.listeners. The valid options based on currently configured "
            "listeners are PLAINTEXT,SASL_SSL,INTERNAL",
        ),
        (
            "security.inter.broker.protocol=TLS\n",
            "Invalid security protocol `TLS` defined in security.inter.broker.protocol",
        ),
        (
            # Kafka's default mechanism, GSSAPI, is not enabled on INTERNAL
            "inter.broker.listener.name=INTERNAL\n",
            "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
            "when SASL is used for inter-broker communication",
        ),
        (
            "security.inter.broker.protocol=SASL_SSL\n"
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256\n",
            "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
            "when SASL is used for inter-broker communication",
        ),
    ],
)
def test_values_kafka_refuses_are_refused_with_its_message(
    tmp_path: Path, lines: str, message: str
) -> None:
    assert message in _refused(tmp_path, LISTENERS + lines)


def test_flags_and_environment_take_them_too(tmp_path: Path) -> None:
    from zonegate.broker.cli import build_parser
    from zonegate.broker.config_file import resolve
    from zonegate.broker.serve_cli import config_from_args

    conf = tmp_path / "server.properties"
    conf.write_text(LISTENERS)
    args = build_parser().parse_args(
        ["node", "--config", str(conf), "--inter-broker-listener-name", "INTERNAL"]
    )
    resolve(args, args.settings, {"ZONEGATE_SASL_MECHANISM_INTER_BROKER_PROTOCOL": "PLAIN"})
    shown = config_from_args(args).broker_configs()
    assert shown["inter.broker.listener.name"] == "INTERNAL"
    assert shown["sasl.mechanism.inter.broker.protocol"] == "PLAIN"
