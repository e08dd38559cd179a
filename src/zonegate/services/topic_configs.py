"""The topic configurations zonegate knows, with Kafka's defaults and validation.

Unknown names and bad values are refused (INVALID_CONFIG), as Kafka does, so a
typo never silently does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


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


def _policy(v: str) -> None:
    parts = [p.strip() for p in v.split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise InvalidConfig(f"value {v!r} is not a list of delete, compact")


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    default: str
    check: Callable[[str], None]


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
    "file.delete.delay.ms": TopicConfigDef("60000", _long(0)),
    "flush.messages": TopicConfigDef("9223372036854775807", _long(1)),
    "flush.ms": TopicConfigDef("9223372036854775807", _long(0)),
    "index.interval.bytes": TopicConfigDef("4096", _long(0)),
    "segment.index.bytes": TopicConfigDef("10485760", _long(4)),
    "segment.jitter.ms": TopicConfigDef("0", _long(0)),
    "preallocate": TopicConfigDef("false", _one_of("true", "false")),
    "message.downconversion.enable": TopicConfigDef("true", _one_of("true", "false")),
}


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


def effective(configs: dict[str, str], name: str) -> str:
    return configs.get(name, TOPIC_CONFIGS[name].default)
