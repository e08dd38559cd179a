"""Settings from a config file and the environment, under the command line's flags.

Every option of `zonegate node` and `zonegate serve` can be set three ways,
the first found winning: the flag (`--node-id 3`), an environment variable
(`ZONEGATE_NODE_ID=3`: ZONEGATE_ and the flag's name), or a line of the config
file named by `--config FILE` or `ZONEGATE_CONFIG` (`node.id=3`: Kafka's name
for the setting where Kafka has one, `zonegate.*` otherwise). The file is a
Java properties file as Kafka's `server.properties`: `key=value` lines, `#`
and `!` comments.

A value from the file or the environment is parsed and checked by the same
function as the flag's, and a bad one is refused at start naming where it came
from; so is a key of the file that is not a setting (a typo would otherwise be
silently ignored). Unknown ZONEGATE_* variables are left alone: other tools use
that prefix too.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zonegate.broker.startup import StartupError

# The option's argparse dest -> its name in the config file.
KEYS: dict[str, str] = {
    "listen": "listeners",
    "advertised_host": "advertised.host.name",
    "data_dir": "log.dirs",
    "object_store": "zonegate.object.store",
    "s3_endpoint": "zonegate.s3.endpoint",
    "metastore": "zonegate.metastore",
    "node_id": "node.id",
    "zone": "broker.rack",
    "zones": "zonegate.zones",
    "cluster_id": "zonegate.cluster.id",
    "group_min_session_timeout_ms": "group.min.session.timeout.ms",
    "group_max_session_timeout_ms": "group.max.session.timeout.ms",
    "group_initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
    "group_consumer_heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    "group_consumer_session_timeout_ms": "group.consumer.session.timeout.ms",
    "wal_seal_bytes": "zonegate.wal.seal.bytes",
    "wal_seal_age_ms": "zonegate.wal.seal.age.ms",
    "wal_seal_when_idle": "zonegate.wal.seal.when.idle",
    "block_cache_bytes": "zonegate.block.cache.bytes",
    "auto_create_topics": "auto.create.topics.enable",
    "num_partitions": "num.partitions",
    "max_request_bytes": "socket.request.max.bytes",
    "rpc_listen": "zonegate.rpc.listener",
    "http_port": "zonegate.http.port",
    "lease_ms": "zonegate.lease.ms",
    "drain_timeout_ms": "zonegate.drain.timeout.ms",
    "zone_routing": "zonegate.zone.routing",
    "zone_map": "zonegate.zone.map",
    "usage_interval_s": "zonegate.usage.interval.s",
    "log_retention_check_interval_ms": "log.retention.check.interval.ms",
    "log_segment_delete_delay_ms": "log.segment.delete.delay.ms",
    "gc_interval_ms": "zonegate.gc.interval.ms",
    "gc_orphan_grace_ms": "zonegate.gc.orphan.grace.ms",
    "usage_retention_days": "zonegate.usage.retention.days",
    "compaction_interval_ms": "zonegate.compaction.interval.ms",
    "stream_object_bytes": "zonegate.stream.object.bytes",
    "compaction_max_delay_ms": "zonegate.compaction.max.delay.ms",
    "log_level": "zonegate.log.level",
}


class _Unset:
    """The default argparse keeps for an option not on the command line."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Setting:
    dest: str
    flag: str
    key: str
    env: str
    parse: Callable[[str], Any]
    default: Any


def env_name(flag: str) -> str:
    return "ZONEGATE_" + flag.removeprefix("--").replace("-", "_").upper()


def layered(parser: argparse.ArgumentParser) -> list[Setting]:
    """Makes the parser's settings layered: each option's default becomes UNSET (so a
    flag given is told from one not given), its help names its key and variable, and
    the settings are returned for `resolve`."""
    settings = []
    for action in parser._actions:
        key = KEYS.get(action.dest)
        if key is None or not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        flag = action.option_strings[0]
        settings.append(
            Setting(action.dest, flag, key, env_name(flag), _parser_of(action), action.default)
        )
        action.help = f"{action.help}. Config file: {key}; environment: {env_name(flag)}"
        action.default = UNSET
    return settings


def _parser_of(action: argparse.Action) -> Callable[[str], Any]:
    convert = action.type if callable(action.type) else str
    choices = action.choices

    def parse(text: str) -> Any:
        value = convert(text.strip())
        if choices is not None and value not in choices:
            allowed = ", ".join(str(c) for c in choices)
            raise argparse.ArgumentTypeError(f"expected one of {allowed}, got {text!r}")
        return value

    return parse


def read_properties(path: Path) -> dict[str, tuple[str, int]]:
    """`key=value` lines of a properties file -> {key: (value, line number)}."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise StartupError(
            f"--config {path}: cannot read it: {(exc.strerror or str(exc)).lower()}"
        ) from None
    found: dict[str, tuple[str, int]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise StartupError(f"config file {path} line {number}: expected key=value, got {raw!r}")
        if key in found:
            raise StartupError(
                f"config file {path} line {number}: {key} is set twice (first on line "
                f"{found[key][1]})"
            )
        found[key] = (value.strip(), number)
    return found


def resolve(
    args: argparse.Namespace,
    settings: list[Setting],
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Fills each setting the command line left UNSET from the environment, else the
    config file, else its default; a bad value raises StartupError naming its source."""
    config = getattr(args, "config", None) or environ.get("ZONEGATE_CONFIG")
    from_file = read_properties(Path(config)) if config else {}
    known = {s.key for s in settings}
    for key, (_, number) in from_file.items():
        if key not in known:
            raise StartupError(
                f"config file {config} line {number}: {key} is not a setting of this command "
                "(see --help for each setting's name)"
            )
    for s in settings:
        if getattr(args, s.dest) is not UNSET:
            continue
        if s.env in environ:
            source, text = f"environment {s.env}", environ[s.env]
        elif s.key in from_file:
            text, number = from_file[s.key]
            source = f"config file {config} line {number}: {s.key}"
        else:
            setattr(args, s.dest, s.default)
            continue
        if s.key == "listeners":
            text = text.removeprefix("PLAINTEXT://")  # Kafka's form of the one listener
        try:
            value = s.parse(text)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise StartupError(f"{source}={text!r} (the setting of {s.flag}): {exc}") from None
        setattr(args, s.dest, value)
