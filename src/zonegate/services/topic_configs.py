"""The topic configurations zonegate knows, with Kafka's defaults and validation.

Unknown names and bad values are refused (INVALID_CONFIG), as Kafka does, so a
typo never silently does nothing. `TopicRules` (storage/topic_rules.py) is the
typed view of every config that decides behaviour, parsed here once when the
catalog changes (`topic_rules`); strings are read only where they are the
product (DescribeConfigs, CreateTopics) or the input (AlterConfigs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from zonegate.records.rewrite import CODEC_IDS
from zonegate.storage.cleaner import CleanerConfig
from zonegate.storage.topic_rules import ProduceRules, RetentionRule, Segmenting, TopicRules


class InvalidConfig(ValueError):
    pass


def _long(lo: int) -> Callable[[str], None]:
    def check(v: str) -> None:
        try:
            n = int(v)
        except ValueError:
            raise InvalidConfig(f"value {v!r} is not an integer") from None
        if n < lo:
            raise InvalidConfig(f"value {n} is below the minimum {lo}")

    return check


def _one_of(*choices: str) -> Callable[[str], None]:
    def check(v: str) -> None:
        if v not in choices:
            raise InvalidConfig(f"value {v!r} is not one of {', '.join(choices)}")

    return check


def _items(v: str) -> list[str]:
    """A list config's items (cleanup.policy: `compact`, `delete` or both), spaces dropped."""
    return [p.strip() for p in v.split(",") if p.strip()]


def _policy(v: str) -> None:
    parts = _items(v)
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise InvalidConfig(f"value {v!r} is not a list of delete, compact")


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    default: str
    check: Callable[[str], None]


def _ratio(v: str) -> None:
    try:
        x = float(v)
    except ValueError:
        raise InvalidConfig(f"value {v!r} is not a number") from None
    if not 0.0 <= x <= 1.0:
        raise InvalidConfig(f"value {x} is not between 0 and 1")


# Every topic config zonegate accepts, each honoured (docs/storage.md says how);
# any other name, Kafka's own included, is refused by name.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "cleanup.policy": TopicConfigDef("delete", _policy),
    "compression.type": TopicConfigDef(
        "producer", _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
    ),
    "retention.ms": TopicConfigDef("604800000", _long(-1)),
    "retention.bytes": TopicConfigDef("-1", _long(-1)),
    "segment.bytes": TopicConfigDef("1073741824", _long(14)),
    "segment.ms": TopicConfigDef("604800000", _long(1)),
    "max.message.bytes": TopicConfigDef("1048588", _long(0)),
    "message.timestamp.type": TopicConfigDef("CreateTime", _one_of("CreateTime", "LogAppendTime")),
    "message.timestamp.before.max.ms": TopicConfigDef("9223372036854775807", _long(0)),
    "message.timestamp.after.max.ms": TopicConfigDef("9223372036854775807", _long(0)),
    "min.insync.replicas": TopicConfigDef("1", _long(1)),
    "unclean.leader.election.enable": TopicConfigDef("false", _one_of("true", "false")),
    "delete.retention.ms": TopicConfigDef("86400000", _long(0)),
    "min.compaction.lag.ms": TopicConfigDef("0", _long(0)),
    "max.compaction.lag.ms": TopicConfigDef("9223372036854775807", _long(1)),
    "min.cleanable.dirty.ratio": TopicConfigDef("0.5", _ratio),
    "flush.messages": TopicConfigDef("9223372036854775807", _long(1)),
    "flush.ms": TopicConfigDef("9223372036854775807", _long(0)),
}

# The broker config that sets each topic config's cluster-wide default (Kafka's names:
# kafka-configs.sh --entity-type brokers --entity-default --add-config log.retention.ms=...).
BROKER_DEFAULT_NAMES: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
}
TOPIC_NAME_OF_DEFAULT = {broker: topic for topic, broker in BROKER_DEFAULT_NAMES.items()}
LIST_CONFIGS = frozenset({"cleanup.policy"})  # the ones APPEND and SUBTRACT apply to


def validate_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """Checked configs with null values dropped; raises InvalidConfig naming the bad one."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        spec = TOPIC_CONFIGS.get(name)
        if spec is None:
            raise InvalidConfig(f"unknown topic config name: {name}")
        if value is None:
            continue
        try:
            spec.check(value)
        except InvalidConfig as exc:
            raise InvalidConfig(f"invalid value for {name}: {exc}") from None
        out[name] = value
    return out


def effective(
    configs: Mapping[str, str], name: str, defaults: Mapping[str, str] | None = None
) -> str:
    """The value in force: the topic's own, else the cluster's default, else Kafka's."""
    value = configs.get(name)
    if value is not None:
        return value
    if defaults is not None and name in defaults:
        return defaults[name]
    return TOPIC_CONFIGS[name].default


def validate_broker_defaults(configs: dict[str, str | None]) -> dict[str, str | None]:
    """Broker-named defaults (`log.retention.ms`...) as topic names, values checked
    (None: back to Kafka's default); InvalidConfig naming a bad or unknown one."""
    out: dict[str, str | None] = {}
    for name, value in configs.items():
        topic_name = TOPIC_NAME_OF_DEFAULT.get(name)
        if topic_name is None:
            raise InvalidConfig(f"broker config {name} cannot be changed at run time")
        if value is not None:
            try:
                TOPIC_CONFIGS[topic_name].check(value)
            except InvalidConfig as exc:
                raise InvalidConfig(f"invalid value for {name}: {exc}") from None
        out[topic_name] = value
    return out


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_incremental(
    current: Mapping[str, str],
    ops: list[tuple[str, int, str | None]],
    defaults: Mapping[str, str] | None = None,
) -> dict[str, str | None]:
    """The changes IncrementalAlterConfigs' (name, operation, value) list makes to
    `current`, as name -> new value (None: deleted); InvalidConfig for a bad one.
    APPEND and SUBTRACT work on list configs, from the value in force, as Kafka's."""
    changes: dict[str, str | None] = {}
    for name, op, value in ops:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"unknown topic config name: {name}")
        if op == SET:
            changes[name] = value
        elif op == DELETE:
            changes[name] = None
        elif op in (APPEND, SUBTRACT):
            if name not in LIST_CONFIGS:
                raise InvalidConfig(f"{name} is not a list: APPEND and SUBTRACT do not apply")
            now = changes.get(name, current.get(name))
            if now is None:
                now = effective({}, name, defaults)
            items = _items(now)
            given = _items(value or "")
            if op == APPEND:
                items += [g for g in given if g not in items]
            else:
                items = [i for i in items if i not in given]
            changes[name] = ",".join(items)
        else:
            raise InvalidConfig(f"unknown operation {op} on {name}")
    return changes


def topic_rules(
    configs: Mapping[str, str], defaults: Mapping[str, str] | None = None
) -> TopicRules:
    """The rules of a topic whose own configs are `configs`, over `defaults` (see
    `effective`); the values were validated when they were set. The catalog calls
    this when a topic or the defaults change: nothing else parses a config."""

    def value(name: str) -> str:
        return effective(configs, name, defaults)

    def long(name: str) -> int:
        return int(value(name))

    max_bytes = long("max.message.bytes")
    compression = value("compression.type")
    codec = None if compression == "producer" else CODEC_IDS[compression]
    policies = _items(value("cleanup.policy"))
    segmenting = Segmenting(long("segment.ms"), long("segment.bytes"))
    retention = RetentionRule(long("retention.ms"), long("retention.bytes"))
    keeps_all = retention.retention_ms < 0 and retention.retention_bytes < 0
    cleaning = CleanerConfig(
        min_cleanable_dirty_ratio=float(value("min.cleanable.dirty.ratio")),
        min_compaction_lag_ms=long("min.compaction.lag.ms"),
        max_compaction_lag_ms=long("max.compaction.lag.ms"),
        delete_retention_ms=long("delete.retention.ms"),
        segment_ms=segmenting.segment_ms,
        segment_bytes=segmenting.segment_bytes,
        codec=codec,
        max_message_bytes=max_bytes,
    )
    return TopicRules(
        produce=ProduceRules(
            max_message_bytes=max_bytes,
            log_append_time=value("message.timestamp.type") == "LogAppendTime",
            timestamp_before_max_ms=long("message.timestamp.before.max.ms"),
            timestamp_after_max_ms=long("message.timestamp.after.max.ms"),
            keys_required="compact" in policies,
            codec=codec,
        ),
        segmenting=segmenting,
        retention=None if "delete" not in policies or keeps_all else retention,
        cleaning=cleaning if "compact" in policies else None,
    )
