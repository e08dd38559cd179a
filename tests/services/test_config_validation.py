"""Broker and group configs checked as Apache Kafka 4.3 checks them, with its messages
(as its broker answered them to kafka-configs), and every topic config of Kafka 4.x
accepted. Pure: no catalog, no store."""

from __future__ import annotations

import pytest

from zonegate.coordinator.consumer_group import ConsumerGroupSettings
from zonegate.services.broker_configs import (
    InvalidBrokerConfig,
    stored_name,
    validate_broker_configs,
)
from zonegate.services.config_defs import InvalidConfig
from zonegate.services.group_configs import GROUP_CONFIGS, node_bounds, validate_group_configs
from zonegate.services.topic_configs import TOPIC_CONFIGS, validate_topic_configs

pytestmark = pytest.mark.unit

# Kafka 4.3's LogConfig names (its TopicConfig, less the internal segment size).
KAFKA_TOPIC_CONFIGS = """cleanup.policy compression.gzip.level compression.lz4.level
compression.type compression.zstd.level delete.retention.ms file.delete.delay.ms
flush.messages flush.ms follower.replication.throttled.replicas index.interval.bytes
leader.replication.throttled.replicas local.retention.bytes local.retention.ms
max.compaction.lag.ms max.message.bytes message.timestamp.after.max.ms
message.timestamp.before.max.ms message.timestamp.type min.cleanable.dirty.ratio
min.compaction.lag.ms min.insync.replicas preallocate remote.log.copy.disable
remote.log.delete.on.disable remote.storage.enable retention.bytes retention.ms
segment.bytes segment.index.bytes segment.jitter.ms segment.ms
unclean.leader.election.enable""".split()


def test_every_kafka_topic_config_is_known_with_a_valid_default() -> None:
    assert set(TOPIC_CONFIGS) == set(KAFKA_TOPIC_CONFIGS)
    assert validate_topic_configs({"file.delete.delay.ms": "10000"}) == {
        "file.delete.delay.ms": "10000"
    }
    for name, defn in TOPIC_CONFIGS.items():
        assert defn.default is not None
        defn.check(name, defn.default)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("foo.bar", "1", "Unknown topic config name: foo.bar"),
        (
            "retention.ms",
            "abc",
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        ),
        (
            "index.interval.bytes",
            "-1",
            "Invalid value -1 for configuration index.interval.bytes: Value must be at least 0",
        ),
        ("max.message.bytes", "2147483648", "Not a number of type INT"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("compression.lz4.level", "0", "Value must be no less than 1 and no more than 17"),
    ],
)
def test_topic_configs_are_refused_with_kafkas_message(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfig, match=message):
        validate_topic_configs({name: value})


def test_kafka_accepts_these_values_and_so_do_we() -> None:
    ok = {
        "preallocate": "TRUE",  # booleans are case-insensitive
        "leader.replication.throttled.replicas": "0:1, 1:2",
        "follower.replication.throttled.replicas": "*",
        "retention.bytes": "-2",  # any long: negative is no limit
        "compression.gzip.level": "-1",
    }
    assert validate_topic_configs(dict(ok)) == ok


def test_broker_configs_kafka_changes_at_run_time() -> None:
    per_broker = {"sasl.kerberos.min.time.before.relogin": "70000"}
    assert validate_broker_configs(dict(per_broker), cluster_default=False) == per_broker
    # Topic defaults are stored under their topic names.
    assert validate_broker_configs(
        {"log.segment.delete.delay.ms": "1000", "num.io.threads": "4"}, cluster_default=True
    ) == {"file.delete.delay.ms": "1000", "num.io.threads": "4"}
    assert stored_name("log.retention.ms") == "retention.ms"
    # A name Kafka does not know is accepted (a plugin's), unchecked.
    assert validate_broker_configs({"foo.bar": "1"}, cluster_default=False) == {"foo.bar": "1"}


@pytest.mark.parametrize(
    ("configs", "cluster_default", "message"),
    [
        (
            {"sasl.kerberos.min.time.before.relogin": "70000"},
            True,
            "Cannot update these configs at default cluster level, broker id must be "
            "specified: [sasl.kerberos.min.time.before.relogin]",
        ),
        ({"log.dirs": "/x"}, False, "Cannot update these configs dynamically: [log.dirs]"),
        (
            {"num.io.threads": "0"},
            False,
            "Invalid value 0 for configuration num.io.threads: Value must be at least 1",
        ),
        (
            {"ssl.keystore.password": "x"},
            False,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: "
            "[ssl.keystore.password]",
        ),
    ],
)
def test_broker_configs_are_refused_as_kafka_refuses_them(
    configs: dict[str, str | None], cluster_default: bool, message: str
) -> None:
    with pytest.raises(InvalidBrokerConfig) as failed:
        validate_broker_configs(configs, cluster_default=cluster_default)
    assert str(failed.value) == message


def test_group_configs_within_the_brokers_bounds() -> None:
    ok = {"consumer.session.timeout.ms": "50000", "streams.num.standby.replicas": "1"}
    assert validate_group_configs(dict(ok)) == ok
    with pytest.raises(InvalidConfig) as failed:
        validate_group_configs({"consumer.session.timeout.ms": "5000"})
    assert str(failed.value) == (
        "consumer.session.timeout.ms must be greater than or equal to "
        "group.consumer.min.session.timeout.ms"
    )
    with pytest.raises(InvalidConfig, match="group.consumer.max.heartbeat.interval.ms"):
        validate_group_configs({"consumer.heartbeat.interval.ms": "15001"})
    with pytest.raises(InvalidConfig, match="Unknown group config name: foo.bar"):
        validate_group_configs({"foo.bar": "1"})
    with pytest.raises(InvalidConfig, match="Not a number of type INT"):
        validate_group_configs({"consumer.session.timeout.ms": "soon"})
    for name, defn in GROUP_CONFIGS.items():
        assert defn.default is not None
        assert validate_group_configs({name: defn.default}) == {name: defn.default}


def test_a_nodes_own_defaults_widen_the_bounds() -> None:
    # A node run with a 6 s session timeout (the tests' clusters) takes groups set to it.
    bounds = node_bounds(
        {"group.consumer.session.timeout.ms": "6000", "group.consumer.heartbeat.interval.ms": "500"}
    )
    assert bounds["group.consumer.min.session.timeout.ms"] == 6000
    assert bounds["group.consumer.max.session.timeout.ms"] == 60000
    assert validate_group_configs({"consumer.session.timeout.ms": "6000"}, bounds)
    assert validate_group_configs({"consumer.heartbeat.interval.ms": "500"}, bounds)


def test_a_groups_own_configs_decide_its_settings() -> None:
    node = ConsumerGroupSettings(heartbeat_interval_ms=5000, session_timeout_ms=45000)
    assert node.for_group({}) is node
    own = node.for_group({"consumer.session.timeout.ms": "50000"})
    assert (own.session_timeout_ms, own.heartbeat_interval_ms) == (50000, 5000)
    own = node.for_group({"consumer.heartbeat.interval.ms": "6000"})
    assert (own.session_timeout_ms, own.heartbeat_interval_ms) == (45000, 6000)
