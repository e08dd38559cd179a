"""The group configs of KIP-848 (ConfigResource type GROUP), checked with Kafka's rules.

IncrementalAlterConfigs and AlterConfigs on a group resource set a group's own
`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms` and the rest of
Kafka 4.x's GroupConfig; DescribeConfigs shows them over the broker's defaults
(`group.consumer.session.timeout.ms`...). Values are checked as Kafka checks
them: the type and range of the config, then the broker's bounds (a group's
session timeout lies within `group.consumer.min/max.session.timeout.ms`); every
refusal is INVALID_CONFIG. The catalog stores them, in the metadata store, per
group; the group coordinator gives a consumer group its own session timeout and
heartbeat interval (coordinator/consumer_service.py). zonegate has no share or
streams groups: their configs are stored and shown with no effect
(docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from zonegate.services.config_defs import ConfigDef, InvalidConfig, boolean, int_, string

# Kafka 4.3's GroupConfig: name -> definition (its default is the broker's).
GROUP_CONFIGS: dict[str, ConfigDef] = {
    "consumer.assignment.interval.ms": int_("1000", 0),
    "consumer.heartbeat.interval.ms": int_("5000", 1),
    "consumer.session.timeout.ms": int_("45000", 1),
    "share.assignment.interval.ms": int_("1000", 0),
    "share.auto.offset.reset": ConfigDef(
        "STRING",
        "latest",
        custom=lambda v: (
            None
            if v in ("latest", "earliest") or v.startswith("by_duration:")
            else "String must be one of: latest, earliest, by_duration:PnDTnHnMn.nS"
        ),
    ),
    "share.delivery.count.limit": int_("5", 2),
    "share.heartbeat.interval.ms": int_("5000", 1),
    "share.isolation.level": string("read_uncommitted", ("read_committed", "read_uncommitted")),
    "share.partition.max.record.locks": int_("2000", 100),
    "share.record.lock.duration.ms": int_("30000", 1000),
    "share.renew.acknowledge.enable": boolean("true"),
    "share.session.timeout.ms": int_("45000", 1),
    "streams.assignment.interval.ms": int_("1000", 0),
    "streams.heartbeat.interval.ms": int_("5000", 1),
    "streams.initial.rebalance.delay.ms": int_("3000", 0),
    "streams.num.standby.replicas": int_("0", 0),
    "streams.session.timeout.ms": int_("45000", 1),
}
# The broker config each takes its default from (DescribeConfigs' synonym); the
# others are their own.
BROKER_SYNONYMS: dict[str, str] = {
    n: f"group.{n}"
    for n in GROUP_CONFIGS
    if n
    not in ("share.auto.offset.reset", "share.isolation.level", "share.renew.acknowledge.enable")
}
# name -> (broker config of the lower bound, its value; of the upper bound, its value),
# Kafka's defaults of those broker configs.
BOUNDS: dict[str, tuple[tuple[str, int] | None, tuple[str, int] | None]] = {
    "consumer.session.timeout.ms": (
        ("group.consumer.min.session.timeout.ms", 45000),
        ("group.consumer.max.session.timeout.ms", 60000),
    ),
    "consumer.heartbeat.interval.ms": (
        ("group.consumer.min.heartbeat.interval.ms", 5000),
        ("group.consumer.max.heartbeat.interval.ms", 15000),
    ),
    "consumer.assignment.interval.ms": (
        ("group.consumer.min.assignment.interval.ms", 0),
        ("group.consumer.max.assignment.interval.ms", 15000),
    ),
    "share.session.timeout.ms": (
        ("group.share.min.session.timeout.ms", 45000),
        ("group.share.max.session.timeout.ms", 60000),
    ),
    "share.heartbeat.interval.ms": (
        ("group.share.min.heartbeat.interval.ms", 5000),
        ("group.share.max.heartbeat.interval.ms", 15000),
    ),
    "share.assignment.interval.ms": (
        ("group.share.min.assignment.interval.ms", 0),
        ("group.share.max.assignment.interval.ms", 15000),
    ),
    "share.record.lock.duration.ms": (
        ("group.share.min.record.lock.duration.ms", 15000),
        ("group.share.max.record.lock.duration.ms", 60000),
    ),
    "share.delivery.count.limit": (
        ("group.share.min.delivery.count.limit", 2),
        ("group.share.max.delivery.count.limit", 10),
    ),
    "share.partition.max.record.locks": (
        ("group.share.min.partition.max.record.locks", 100),
        ("group.share.max.partition.max.record.locks", 4000),
    ),
    "streams.session.timeout.ms": (
        ("group.streams.min.session.timeout.ms", 45000),
        ("group.streams.max.session.timeout.ms", 60000),
    ),
    "streams.heartbeat.interval.ms": (
        ("group.streams.min.heartbeat.interval.ms", 5000),
        ("group.streams.max.heartbeat.interval.ms", 15000),
    ),
    "streams.assignment.interval.ms": (
        ("group.streams.min.assignment.interval.ms", 0),
        ("group.streams.max.assignment.interval.ms", 15000),
    ),
    "streams.num.standby.replicas": (None, ("group.streams.max.standby.replicas", 2)),
}

SCOPE_PREFIX = "group:"  # the catalog's scope of a group's configs


def group_scope(group_id: str) -> str:
    return SCOPE_PREFIX + group_id


def unknown_group_config(name: str) -> InvalidConfig:
    return InvalidConfig(f"Unknown group config name: {name}")


def validate_group_configs(
    configs: Mapping[str, str | None], bounds: Mapping[str, int] | None = None
) -> dict[str, str]:
    """A group's configs after a change (None: removed), checked; InvalidConfig with
    Kafka's message for the first refused. `bounds`: the broker's own values of the
    bounds, where they differ from Kafka's defaults."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        defn = GROUP_CONFIGS.get(name)
        if defn is None:
            raise unknown_group_config(name)
        if value is None:
            continue
        defn.check(name, value)
        low, high = BOUNDS.get(name, (None, None))
        if low is not None:
            floor = (bounds or {}).get(low[0], low[1])
            if int(value.strip()) < floor:
                raise InvalidConfig(f"{name} must be greater than or equal to {low[0]}")
        if high is not None:
            ceiling = (bounds or {}).get(high[0], high[1])
            if int(value.strip()) > ceiling:
                raise InvalidConfig(f"{name} must be less than or equal to {high[0]}")
        out[name] = value
    return out


def node_bounds(static: Mapping[str, str]) -> dict[str, int]:
    """The bounds in force on a node: Kafka's defaults, widened to take in the node's
    own `group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms`
    (zonegate has no min/max settings; Kafka refuses to start with a default outside
    its bounds, so a node's own default is always within them)."""
    out: dict[str, int] = {}
    for name, (low, high) in BOUNDS.items():
        own = static.get(f"group.{name}")
        if own is None:
            continue
        if low is not None:
            out[low[0]] = min(low[1], int(own))
        if high is not None:
            out[high[0]] = max(high[1], int(own))
    return out
