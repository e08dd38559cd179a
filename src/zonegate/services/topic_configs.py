"""The topic configs of Kafka 4.x, with Kafka's defaults and validation.

Every name Kafka knows is accepted, those with no effect here too (HONOURED
names the others' complement; docs/compatibility.md says why each has none);
unknown names and bad values are refused (INVALID_CONFIG) with Kafka's
messages, so a typo never silently does nothing. `TopicRules` (storage/topic_rules.py) is the
typed view of every config that decides behaviour, parsed here once when the
catalog changes (`topic_rules`); strings are read only where they are the
product (DescribeConfigs, CreateTopics) or the input (AlterConfigs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from zonegate.records.codecs import CompressionLevels
from zonegate.records.rewrite import CODEC_IDS
from zonegate.services.config_defs import (
    ConfigDef,
    boolean,
    double,
    int_,
    items,
    long,
    replicas_list,
    string,
)
from zonegate.services.config_defs import InvalidConfig as InvalidConfig
from zonegate.storage.cleaner import CleanerConfig
from zonegate.storage.topic_rules import ProduceRules, RetentionRule, Segmenting, TopicRules


def _policy(v: str) -> str | None:
    if not items(v):
        return "String must be one of: compact, delete"
    return None


LONG_MAX_TEXT = "9223372036854775807"

# Every topic config of Apache Kafka 4.x (its LogConfig), with Kafka's type, default
# and validator. Those in HONOURED decide behaviour (docs/storage.md says how); the
# others describe what zonegate does not have (flush, preallocation, local index
# files, replication throttles, tiered storage...): stored, shown and validated as
# Kafka does, with no effect (docs/compatibility.md lists them and why). Any other
# name is refused, as Kafka refuses it.
TOPIC_CONFIGS: dict[str, ConfigDef] = {
    "cleanup.policy": ConfigDef("LIST", "delete", choices=("compact", "delete"), custom=_policy),
    "compression.gzip.level": ConfigDef(
        "INT",
        "-1",
        custom=lambda v: (
            None if int(v) == -1 or 1 <= int(v) <= 9 else "Value must be between 1 and 9, or -1"
        ),
    ),
    "compression.lz4.level": int_("9", 1, 17),
    "compression.type": string(
        "producer", ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
    ),
    "compression.zstd.level": int_("3", -131072, 22),
    "delete.retention.ms": long("86400000", 0),
    "file.delete.delay.ms": long("60000", 0),
    "flush.messages": long(LONG_MAX_TEXT, 1),
    "flush.ms": long(LONG_MAX_TEXT, 0),
    "follower.replication.throttled.replicas": ConfigDef("LIST", "", custom=replicas_list),
    "index.interval.bytes": int_("4096", 0),
    "leader.replication.throttled.replicas": ConfigDef("LIST", "", custom=replicas_list),
    "local.retention.bytes": long("-2", -2),
    "local.retention.ms": long("-2", -2),
    "max.compaction.lag.ms": long(LONG_MAX_TEXT, 1),
    # Kafka's is an INT; zonegate's limit is the same.
    "max.message.bytes": int_("1048588", 0),
    # Kafka 4.x's default is 3600000 (one hour); zonegate keeps no limit, as
    # Kafka 3.x did (docs/compatibility.md).
    "message.timestamp.after.max.ms": long("3600000", 0),  # Kafka 4.x (KIP-937)
    "message.timestamp.before.max.ms": long(LONG_MAX_TEXT, 0),
    "message.timestamp.type": string("CreateTime", ("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": double("0.5", 0, 1),
    "min.compaction.lag.ms": long("0", 0),
    "min.insync.replicas": int_("1", 1),
    "preallocate": boolean("false"),
    "remote.log.copy.disable": boolean("false"),
    "remote.log.delete.on.disable": boolean("false"),
    "remote.storage.enable": boolean("false"),
    "retention.bytes": long("-1"),
    "retention.ms": long("604800000", -1),
    # Kafka 4.x's minimum is 1048576 (tests use its internal.segment.bytes);
    # zonegate draws segments in its index only, so small ones cost nothing.
    "segment.bytes": int_("1073741824", 14),
    "segment.index.bytes": int_("10485760", 4),
    "segment.jitter.ms": long("0", 0),
    "segment.ms": long("604800000", 1),
    "unclean.leader.election.enable": boolean("false"),
}

# The configs that change what zonegate does; the rest are kept and shown only.
HONOURED = frozenset(
    {
        "cleanup.policy",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.ms",
    }
)

# The broker config that sets each topic config's cluster-wide default (Kafka's
# ServerTopicConfigSynonyms: kafka-configs.sh --entity-type brokers --entity-default
# --add-config log.retention.ms=...). The remote.* switches have none.
BROKER_DEFAULT_NAMES: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.type": "compression.type",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
TOPIC_NAME_OF_DEFAULT = {broker: topic for topic, broker in BROKER_DEFAULT_NAMES.items()}
# Broker configs whose default in Kafka is null: Kafka takes the value from the
# coarser form (log.retention.hours, log.roll.hours, log.roll.jitter.hours) or has
# none (log.flush.interval.ms), so DescribeConfigs shows no DEFAULT_CONFIG synonym
# under them; a value set at run time or in the node's settings still shows.
NULL_DEFAULT_BROKER_NAMES = frozenset(
    {"log.flush.interval.ms", "log.retention.ms", "log.roll.ms", "log.roll.jitter.ms"}
)


def unknown_topic_config(name: str) -> InvalidConfig:
    return InvalidConfig(f"Unknown topic config name: {name}")


def validate_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """Checked configs with null values dropped; raises InvalidConfig naming the bad one."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        spec = TOPIC_CONFIGS.get(name)
        if spec is None:
            raise unknown_topic_config(name)
        if value is None:
            continue
        spec.check(name, value)
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
    default = TOPIC_CONFIGS[name].default
    return "" if default is None else default


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_incremental(
    current: Mapping[str, str],
    ops: list[tuple[str, int, str | None]],
    defaults: Mapping[str, str] | None = None,
    *,
    lookup: Callable[[str], ConfigDef | None] = TOPIC_CONFIGS.get,
    unknown_allowed: bool = False,
) -> dict[str, str | None]:
    """The changes IncrementalAlterConfigs' (name, operation, value) list makes to
    `current`, as name -> new value (None: deleted); InvalidConfig for a bad one.
    APPEND and SUBTRACT work on list configs, from the value in force, as Kafka's.
    `lookup` names the configs (topic configs unless told); a name it does not know
    is refused, unless `unknown_allowed` (Kafka's broker configs)."""
    changes: dict[str, str | None] = {}
    for name, op, value in ops:
        defn = lookup(name)
        if defn is None and not unknown_allowed:
            raise unknown_topic_config(name)
        if op == SET:
            changes[name] = value
        elif op == DELETE:
            changes[name] = None
        elif op in (APPEND, SUBTRACT):
            if defn is None or defn.type != "LIST":
                raise InvalidConfig(f"{name} is not a list: APPEND and SUBTRACT do not apply")
            now = changes.get(name, current.get(name))
            if now is None:
                now = defaults[name] if defaults and name in defaults else defn.default or ""
            have = items(now)
            given = items(value or "")
            if op == APPEND:
                have += [g for g in given if g not in have]
            else:
                have = [i for i in have if i not in given]
            changes[name] = ",".join(have)
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
        return int(value(name).strip())

    max_bytes = long("max.message.bytes")
    compression = value("compression.type")
    codec = None if compression == "producer" else CODEC_IDS[compression]
    levels = CompressionLevels(
        long("compression.gzip.level"),
        long("compression.lz4.level"),
        long("compression.zstd.level"),
    )
    policies = items(value("cleanup.policy"))
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
        levels=levels,
    )
    return TopicRules(
        produce=ProduceRules(
            max_message_bytes=max_bytes,
            log_append_time=value("message.timestamp.type") == "LogAppendTime",
            timestamp_before_max_ms=long("message.timestamp.before.max.ms"),
            timestamp_after_max_ms=long("message.timestamp.after.max.ms"),
            keys_required="compact" in policies,
            codec=codec,
            levels=levels,
        ),
        segmenting=segmenting,
        retention=None if "delete" not in policies or keeps_all else retention,
        cleaning=cleaning if "compact" in policies else None,
        file_delete_delay_ms=_set_at_run_time(configs, "file.delete.delay.ms", defaults),
    )


def _set_at_run_time(
    configs: Mapping[str, str], name: str, defaults: Mapping[str, str] | None
) -> int | None:
    """A LONG config's value if the topic or a default set at run time gives one;
    None where the node's own setting applies (Kafka's static broker config)."""
    value = configs.get(name)
    if value is None and defaults is not None:
        value = defaults.get(name)
    return None if value is None else int(value.strip())
