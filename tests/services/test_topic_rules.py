"""A topic's configs parsed into typed rules, field by field: Kafka's defaults, the
defaults set at run time over them, a topic's own over those, and bad values refused
before they can reach the rules. Pure: no catalog, no store."""

from __future__ import annotations

import dataclasses

import pytest

from zonegate.records.codecs import CompressionLevels
from zonegate.services.broker_configs import InvalidBrokerConfig, validate_broker_configs
from zonegate.services.topic_configs import (
    BROKER_DEFAULT_NAMES,
    HONOURED,
    TOPIC_CONFIGS,
    InvalidConfig,
    topic_rules,
    validate_topic_configs,
)
from zonegate.storage.cleaner import CleanerConfig
from zonegate.storage.topic_rules import ProduceRules, RetentionRule, Segmenting, TopicRules

pytestmark = pytest.mark.unit

NO_LIMIT = 2**63 - 1
KAFKA = TopicRules(
    produce=ProduceRules(
        max_message_bytes=1_048_588,
        log_append_time=False,
        timestamp_before_max_ms=NO_LIMIT,
        timestamp_after_max_ms=3_600_000,  # Kafka 4.x's hour
        keys_required=False,
        codec=None,
    ),
    segmenting=Segmenting(segment_ms=604_800_000, segment_bytes=1_073_741_824),
    retention=RetentionRule(retention_ms=604_800_000, retention_bytes=-1),
    cleaning=None,
)
# Stored, shown and validated, with no effect (docs/compatibility.md): no rule follows
# from them. A valid value of each, not Kafka's default.
NO_EFFECT = {
    "flush.messages": "2",
    "flush.ms": "2",
    "follower.replication.throttled.replicas": "0:1,1:2",
    "index.interval.bytes": "2",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "2",
    "local.retention.ms": "2",
    "min.insync.replicas": "2",
    "preallocate": "true",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "remote.storage.enable": "true",
    "segment.index.bytes": "2000",
    "segment.jitter.ms": "2",
    "unclean.leader.election.enable": "true",
}
BY_DESIGN = set(NO_EFFECT)
# Read by cleaning only, so parsed for a compacted topic (test below).
CLEANING_ONLY = {
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
}


def _produce(**changes: object) -> ProduceRules:
    return dataclasses.replace(KAFKA.produce, **changes)  # type: ignore[arg-type]


def _kafka_with(**changes: object) -> TopicRules:
    return dataclasses.replace(KAFKA, **changes)  # type: ignore[arg-type]


# One config set away from Kafka's default, and the rules that follow from it alone.
EACH: list[tuple[str, str, TopicRules]] = [
    (
        "cleanup.policy",
        "compact",
        _kafka_with(produce=_produce(keys_required=True), retention=None, cleaning=CleanerConfig()),
    ),
    (
        "cleanup.policy",
        "delete, compact",
        _kafka_with(produce=_produce(keys_required=True), cleaning=CleanerConfig()),
    ),
    ("compression.type", "snappy", _kafka_with(produce=_produce(codec=2))),
    ("compression.type", "uncompressed", _kafka_with(produce=_produce(codec=0))),
    ("retention.ms", "1000", _kafka_with(retention=RetentionRule(1000, -1))),
    ("retention.ms", "-1", _kafka_with(retention=None)),  # both limits off: keeps all
    ("retention.bytes", "5", _kafka_with(retention=RetentionRule(604_800_000, 5))),
    ("segment.bytes", "1000", _kafka_with(segmenting=Segmenting(604_800_000, 1000))),
    ("segment.ms", "60000", _kafka_with(segmenting=Segmenting(60_000, 1_073_741_824))),
    ("max.message.bytes", "500", _kafka_with(produce=_produce(max_message_bytes=500))),
    (
        "message.timestamp.type",
        "LogAppendTime",
        _kafka_with(produce=_produce(log_append_time=True)),
    ),
    (
        "message.timestamp.before.max.ms",
        "10",
        _kafka_with(produce=_produce(timestamp_before_max_ms=10)),
    ),
    (
        "message.timestamp.after.max.ms",
        "20",
        _kafka_with(produce=_produce(timestamp_after_max_ms=20)),
    ),
    ("file.delete.delay.ms", "10000", _kafka_with(file_delete_delay_ms=10000)),
    (
        "compression.gzip.level",
        "5",
        _kafka_with(produce=_produce(levels=CompressionLevels(gzip=5))),
    ),
    (
        "compression.lz4.level",
        "3",
        _kafka_with(produce=_produce(levels=CompressionLevels(lz4=3))),
    ),
    (
        "compression.zstd.level",
        "7",
        _kafka_with(produce=_produce(levels=CompressionLevels(zstd=7))),
    ),
]


def test_no_configs_are_kafkas_defaults() -> None:
    assert topic_rules({}) == KAFKA
    # Accepted, but nothing obeys them.
    assert validate_topic_configs(dict(NO_EFFECT)) == NO_EFFECT
    assert topic_rules(NO_EFFECT) == KAFKA
    assert BY_DESIGN == set(TOPIC_CONFIGS) - HONOURED


@pytest.mark.parametrize(("name", "value", "rules"), EACH, ids=[f"{n}={v}" for n, v, _ in EACH])
def test_each_config_parses_into_its_field(name: str, value: str, rules: TopicRules) -> None:
    assert topic_rules({name: value}) == rules
    # The same value as a default set at run time (the cluster's, or a node's own,
    # as the catalog merges them) gives the same rules...
    assert topic_rules({}, {name: value}) == rules
    # ...and a topic's own value wins over it. (A file.delete.delay.ms set to Kafka's
    # default is kept as set: unset, the node's own delay applies.)
    own = topic_rules({name: TOPIC_CONFIGS[name].default}, {name: value})
    if name == "file.delete.delay.ms":
        own = dataclasses.replace(own, file_delete_delay_ms=None)
    assert own == KAFKA


def test_every_config_that_decides_behaviour_is_parsed() -> None:
    assert {n for n, _, _ in EACH} | BY_DESIGN | CLEANING_ONLY == set(TOPIC_CONFIGS)


def test_a_compacted_topics_cleaning_configs() -> None:
    configs = {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.25",
        "min.compaction.lag.ms": "5",
        "max.compaction.lag.ms": "6",
        "delete.retention.ms": "7",
        "segment.ms": "8",
        "compression.type": "zstd",
    }
    rules = topic_rules(configs, {"segment.bytes": "900"})
    assert rules.cleaning == CleanerConfig(
        min_cleanable_dirty_ratio=0.25,
        min_compaction_lag_ms=5,
        max_compaction_lag_ms=6,
        delete_retention_ms=7,
        segment_ms=8,
        segment_bytes=900,
        codec=4,
        max_message_bytes=1_048_588,
    )
    assert rules.segmenting == (8, 900) and rules.retention is None
    # The cleaning configs decide nothing for a topic that is not compacted.
    assert topic_rules({**configs, "cleanup.policy": "delete"}).cleaning is None


def test_defaults_layer_under_a_topics_own_configs() -> None:
    rules = topic_rules(
        {"segment.ms": "1", "cleanup.policy": "compact,delete"},
        {"segment.ms": "2", "segment.bytes": "3", "retention.bytes": "4"},
    )
    assert rules.segmenting == Segmenting(1, 3)
    assert rules.retention == RetentionRule(604_800_000, 4)
    assert rules.produce.keys_required and rules.cleaning is not None


# A value each config's check refuses, by Kafka's rules. (retention.bytes takes any
# long in Kafka, -2 too: a negative one is no limit.)
BAD = {
    "cleanup.policy": "delete,remove",
    "compression.type": "brotli",
    "retention.ms": "-2",
    "retention.bytes": "9223372036854775808",
    "segment.bytes": "13",
    "segment.ms": "0",
    "max.message.bytes": "-1",
    "message.timestamp.type": "NoTime",
    "message.timestamp.before.max.ms": "-1",
    "message.timestamp.after.max.ms": "-1",
    "min.insync.replicas": "0",
    "unclean.leader.election.enable": "yes",
    "delete.retention.ms": "-1",
    "min.compaction.lag.ms": "-1",
    "max.compaction.lag.ms": "0",
    "min.cleanable.dirty.ratio": "1.5",
    "flush.messages": "0",
    "flush.ms": "-1",
    "compression.gzip.level": "0",
    "compression.lz4.level": "18",
    "compression.zstd.level": "23",
    "file.delete.delay.ms": "-1",
    "follower.replication.throttled.replicas": "0-1",
    "leader.replication.throttled.replicas": "all",
    "index.interval.bytes": "-1",
    "local.retention.bytes": "-3",
    "local.retention.ms": "-3",
    "preallocate": "yes",
    "remote.log.copy.disable": "1",
    "remote.log.delete.on.disable": "0",
    "remote.storage.enable": "on",
    "segment.index.bytes": "3",
    "segment.jitter.ms": "-1",
}
# An empty list is a valid list.
EMPTY_IS_VALID = {
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
}


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_bad_values_are_refused_before_they_reach_the_rules(name: str) -> None:
    for bad in (BAD[name], "x", *(() if name in EMPTY_IS_VALID else ("",))):
        with pytest.raises(InvalidConfig, match=name):
            validate_topic_configs({name: bad})
        if name in BROKER_DEFAULT_NAMES:  # the cluster's default of it, on a broker
            broker_name = BROKER_DEFAULT_NAMES[name]
            with pytest.raises(InvalidBrokerConfig, match=broker_name):
                validate_broker_configs({broker_name: bad}, cluster_default=True)
    # Kafka's own default passes, and parses.
    assert validate_topic_configs({name: TOPIC_CONFIGS[name].default}) == {
        name: TOPIC_CONFIGS[name].default
    }
    topic_rules({name: TOPIC_CONFIGS[name].default})
