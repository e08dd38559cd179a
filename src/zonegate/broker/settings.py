"""Every setting of `zonegate node` and `zonegate serve`, declared once.

Each `Setting` row (setting_types.py) is the whole truth about one setting: its
flag, its config-file key (Kafka's name where Kafka has one, `zonegate.*`
otherwise), its environment variable (`ZONEGATE_` and the flag's name), its
default, its help, how a value is parsed and checked, and the `NodeConfig`
field it sets. The CLI (`add_settings`), the config file and the environment
(config_file.py), `NodeConfig`'s defaults (`field_default`) and
docs/configuration.md (settings_doc.py) are all made from these rows, so they
cannot disagree. The QoS rows live with the rest of QoS in qos_flags.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zonegate.broker.acl_settings import ACL_SETTINGS
from zonegate.broker.cores import workers_setting
from zonegate.broker.qos_flags import QOS_SETTINGS
from zonegate.broker.rpc_tls_settings import RPC_TLS_SETTINGS
from zonegate.broker.security_settings import SECURITY_SETTINGS
from zonegate.broker.setting_types import (
    MS,
    MS_POSITIVE,
    ON_OFF,
    REQUEST_MAX_BYTES,
    Setting,
    host_port,
    is_true,
    log_level,
    ms_at_least,
    ms_to_s,
    node_id,
    rpc_dial_map,
    rpc_listener,
    size_at_least,
    zone,
    zone_cidrs,
)
from zonegate.broker.txn_settings import TXN_SETTINGS
from zonegate.runtime.units import at_least

SETTINGS: tuple[Setting, ...] = (
    *SECURITY_SETTINGS,  # listeners, TLS, SASL: Kafka's own settings
    *ACL_SETTINGS,  # the authorizer: Kafka's own settings
    Setting(
        "--data-dir",
        "log.dirs",
        Path("./zonegate-data"),
        "where the node keeps its data (default ./zonegate-data)",
        Path,
        "DATA_DIR",
        serve_help="where the nodes keep their data: DATA_DIR/objects (object store), "
        "DATA_DIR/meta.db (metadata store), DATA_DIR/node-N (default ./zonegate-data)",
    ),
    Setting(
        "--object-store",
        "zonegate.object.store",
        None,
        "where WAL objects and usage records go: file:///absolute/path or "
        "s3://bucket/prefix (default file://DATA_DIR/objects)",
        metavar="URL",
        into="object_store_url",
    ),
    Setting(
        "--s3-endpoint",
        "zonegate.s3.endpoint",
        None,
        "S3 endpoint URL for an s3:// object store, e.g. http://minio:9000 (default: AWS's)",
        metavar="URL",
    ),
    Setting(
        "--metastore",
        "zonegate.metastore",
        None,
        "metadata store: sqlite:///path/meta.db, or postgresql://user:password@host:port/"
        "database shared by nodes on several machines (default sqlite:///DATA_DIR/meta.db)",
        metavar="URL",
        into="metastore_url",
    ),
    Setting(
        "--node-id",
        "node.id",
        1,
        "this node's id, unique in the cluster; from-ip:ADDRESS makes it from the "
        "machine's IP address (default {default})",
        node_id,
        "ID",
        serve_help="id of the first zone's node; zone i's node gets ID+i (default {default})",
    ),
    Setting(
        "--zone",
        "broker.rack",
        "zone-a",
        "this node's availability zone; clients are served by nodes of their own "
        "zone; from-node-label: the Kubernetes machine's topology.kubernetes.io/zone "
        "label (default {default})",
        metavar="ZONE",
        convert=zone,
        only="node",
    ),
    Setting(
        "--zones",
        "zonegate.zones",
        "zone-a,zone-b,zone-c",
        "comma-separated zone names, one node each; one name runs a single node "
        "(default {default})",
        metavar="ZONE,...",
        into=None,
        only="serve",
    ),
    Setting(
        "--cluster-id",
        "zonegate.cluster.id",
        "zonegate",
        "cluster name, the same on every node: Kafka's cluster id is derived from it and "
        "usage records carry it (default {default})",
        metavar="NAME",
    ),
    Setting(
        "--group-min-session-timeout-ms",
        "group.min.session.timeout.ms",
        6000,
        "group.min.session.timeout.ms (default {default})",
        **MS,
    ),
    Setting(
        "--group-max-session-timeout-ms",
        "group.max.session.timeout.ms",
        1_800_000,
        "group.max.session.timeout.ms (default {default})",
        **MS,
    ),
    Setting(
        "--group-initial-rebalance-delay-ms",
        "group.initial.rebalance.delay.ms",
        3000,
        "group.initial.rebalance.delay.ms: how long a new group waits for more members "
        "before its first rebalance (default {default})",
        **MS,
    ),
    Setting(
        "--group-consumer-heartbeat-interval-ms",
        "group.consumer.heartbeat.interval.ms",
        5000,
        "group.consumer.heartbeat.interval.ms: how often KIP-848 consumers heartbeat "
        "(default {default})",
        **MS_POSITIVE,
    ),
    Setting(
        "--group-consumer-session-timeout-ms",
        "group.consumer.session.timeout.ms",
        45000,
        "group.consumer.session.timeout.ms: a KIP-848 consumer silent this long leaves "
        "the group (default {default})",
        **MS_POSITIVE,
    ),
    Setting(
        "--wal-seal-bytes",
        "zonegate.wal.seal.bytes",
        8 * 1024 * 1024,
        "seal and upload a WAL object when it holds this many bytes (default {default}, 8 MiB)",
        size_at_least(1),
        "BYTES",
    ),
    Setting(
        "--block-cache-bytes",
        "zonegate.block.cache.bytes",
        256 * 1024 * 1024,
        "each node's cache of 1 MiB blocks of stream objects, read ahead for catch-up "
        "consumers (docs/storage.md; default {default}, 256 MiB; 0 turns it off)",
        size_at_least(0),
        "BYTES",
    ),
    Setting(
        "--wal-seal-age-ms",
        "zonegate.wal.seal.age.ms",
        None,
        "seal and upload a WAL object at this age at the latest (default 250 on S3, "
        "2 on a local directory)",
        ms_at_least(0, float),
        "MS",
    ),
    Setting(
        "--wal-seal-when-idle",
        "zonegate.wal.seal.when.idle",
        "true",
        "seal a WAL object at once when no upload is in flight, or when the one in flight "
        "has run twice the usual PUT time (group commit; the seal age and size stay upper "
        "bounds); false: wait for the age or size (default true)",
        choices=ON_OFF,
        convert=is_true,
    ),
    Setting(
        "--auto-create-topics",
        "auto.create.topics.enable",
        "true",
        "auto.create.topics.enable (default {default})",
        choices=ON_OFF,
        convert=is_true,
    ),
    Setting(
        "--num-partitions",
        "num.partitions",
        1,
        "partitions of auto-created topics, num.partitions (default {default})",
        at_least(1, int),
        "N",
        into="default_partitions",
    ),
    Setting(
        "--max-request-bytes",
        "socket.request.max.bytes",
        REQUEST_MAX_BYTES,
        "largest request accepted, socket.request.max.bytes (default {default})",
        size_at_least(1),
        "BYTES",
    ),
    Setting(
        "--socket-receive-buffer-bytes",
        "socket.receive.buffer.bytes",
        102400,
        "SO_RCVBUF of the Kafka listeners' sockets, socket.receive.buffer.bytes (default "
        "{default}, Kafka's; -1: the OS default, its autotuning)",
        at_least(-1, int),
        "BYTES",
    ),
    Setting(
        "--socket-send-buffer-bytes",
        "socket.send.buffer.bytes",
        102400,
        "SO_SNDBUF of the Kafka listeners' sockets, socket.send.buffer.bytes (default "
        "{default}, Kafka's; -1: the OS default, its autotuning)",
        at_least(-1, int),
        "BYTES",
    ),
    Setting(
        "--rpc-listen",
        "zonegate.rpc.listener",
        None,
        "leader gRPC listener HOST:PORT (default: the Kafka host, any free port)",
        host_port,
        "HOST:PORT",
        into=("rpc_host", "rpc_port"),
        convert=rpc_listener,
    ),
    Setting(
        "--rpc-dial-map",
        "zonegate.rpc.dial.map",
        "",
        "other nodes' advertised leader RPC addresses and the address this node dials for "
        "each instead, when a proxy or NAT stands between zones: "
        "10.0.2.7:9093=10.0.1.250:19093,... (default: none; every node is dialled at the "
        "address it advertises)",
        metavar="HOST:PORT=HOST:PORT,...",
        into="rpc_dial_map",
        convert=rpc_dial_map,
    ),
    Setting(
        "--http-port",
        "zonegate.http.port",
        None,
        "port for /metrics, /healthz, /readyz (default: no HTTP endpoint)",
        at_least(0, int),
        "PORT",
        serve_help="port for /metrics, /healthz, /readyz on the first zone's node, PORT+i on "
        "zone i's (default: the --listen port + 100, so 9192, 9193, 9194; 0: any free ports)",
    ),
    Setting(
        "--lease-ms",
        "zonegate.lease.ms",
        6000,
        "node and controller lease: a node silent this long has its partitions moved "
        "to live nodes (default {default})",
        **MS_POSITIVE,
    ),
    Setting(
        "--auto-leader-rebalance",
        "auto.leader.rebalance.enable",
        "true",
        "auto.leader.rebalance.enable: the controller moves leaders back to their preferred "
        "nodes and spreads them evenly over zones and nodes (default {default}; "
        "docs/operations.md)",
        choices=ON_OFF,
        convert=is_true,
        into="auto_leader_rebalance",
    ),
    Setting(
        "--leader-imbalance-check-interval-s",
        "leader.imbalance.check.interval.seconds",
        10,
        "leader.imbalance.check.interval.seconds: how often the controller checks the "
        "leader balance (default {default}; Kafka's is 300: moves here are metadata only)",
        at_least(1, int),
        "SECONDS",
    ),
    Setting(
        "--leader-imbalance-per-broker-percentage",
        "leader.imbalance.per.broker.percentage",
        10,
        "leader.imbalance.per.broker.percentage: how far off its share a node may be "
        "before leaders move (default {default})",
        at_least(0, int),
        "PERCENT",
    ),
    Setting(
        "--zone-routing",
        "zonegate.zone.routing",
        "true",
        "answer Metadata with nodes of the client's zone only; false: the real leaders, "
        "as plain Kafka (default {default})",
        choices=ON_OFF,
        convert=is_true,
    ),
    Setting(
        "--zone-map",
        "zonegate.zone.map",
        "",
        "client source CIDR to zone, for clients whose client.id names no zone: "
        "10.0.1.0/24=zone-a,10.0.2.0/24=zone-b (default: none; such clients are in the "
        "zone of the node they reach)",
        metavar="CIDR=ZONE,...",
        into="zone_cidrs",
        convert=zone_cidrs,
    ),
    Setting(
        "--usage-interval-s",
        "zonegate.usage.interval.s",
        60.0,
        "how often each node writes its usage records (docs/usage-records.md) under "
        "usage/ in the object store, and once more when it stops (default {default})",
        at_least(0.001, float),
        "SECONDS",
    ),
    Setting(
        "--log-retention-check-interval-ms",
        "log.retention.check.interval.ms",
        30_000,
        "log.retention.check.interval.ms: how often each node applies its partitions' "
        "retention.ms and retention.bytes (default {default}; Kafka's is 300000, "
        "docs/storage.md)",
        **MS_POSITIVE,
        into="retention_check_interval_ms",
    ),
    Setting(
        "--log-segment-delete-delay-ms",
        "log.segment.delete.delay.ms",
        60_000,
        "log.segment.delete.delay.ms: how long an object no index entry names any more "
        "is kept before object GC deletes it, for readers still in flight (default "
        "{default}); a topic's file.delete.delay.ms overrides it for its objects "
        "(docs/storage.md)",
        **MS,
        into="segment_delete_delay_ms",
    ),
    Setting(
        "--gc-interval-ms",
        "zonegate.gc.interval.ms",
        60_000,
        "how often the controller's object GC lists the WAL objects and deletes what "
        "nothing names (default {default})",
        **MS_POSITIVE,
    ),
    Setting(
        "--gc-orphan-grace-ms",
        "zonegate.gc.orphan.grace.ms",
        600_000,
        "how long after its upload an object never committed (a node killed between its "
        "PUT and its commit) is kept before GC may delete it (default {default}: longer than "
        "any commit can still be retried)",
        **MS,
    ),
    Setting(
        "--compaction-interval-ms",
        "zonegate.compaction.interval.ms",
        5_000,
        "how often each node looks for WAL ranges of the partitions it leads to rewrite "
        "into stream objects (default {default}; docs/storage.md)",
        **MS_POSITIVE,
    ),
    Setting(
        "--stream-object-bytes",
        "zonegate.stream.object.bytes",
        16 * 1024 * 1024,
        "a partition's data still in WAL objects is rewritten into a stream object once "
        "it reaches this much (or the topic's smaller segment.bytes); the largest stream "
        "object compaction writes (default {default})",
        size_at_least(1),
        "BYTES",
    ),
    Setting(
        "--compaction-max-delay-ms",
        "zonegate.compaction.max.delay.ms",
        540_000,
        "data is rewritten out of WAL objects once it waited min(segment.ms, this), "
        "at the next compaction pass (default {default}: by default nothing stays in a WAL "
        "object 10 minutes)",
        **MS,
    ),
    Setting(
        "--usage-retention-days",
        "zonegate.usage.retention.days",
        30,
        "usage records older than this are deleted by object GC (default {default})",
        at_least(1, int),
        "DAYS",
    ),
    Setting(
        "--log-level",
        "zonegate.log.level",
        "INFO",
        "DEBUG, INFO, WARNING or ERROR; logs go to stderr (default {default})",
        log_level,
        "LEVEL",
        into=None,
    ),
    Setting(
        "--drain-timeout-ms",
        "zonegate.drain.timeout.ms",
        10000,
        "on SIGTERM, how long the node waits for the requests it accepted to be "
        "answered before it closes their connections (default {default}); a second signal "
        "exits at once",
        **MS,
        into="drain_timeout_s",
        convert=ms_to_s,
    ),
    Setting(
        "--workers",
        "zonegate.workers",
        1,
        "processes serving the node's Kafka listeners (docs/cores.md): 1 the node process "
        "alone, N the node process and N - 1 workers sharing its listeners, 0 the cores the "
        "container is allowed (its cgroup CPU quota, else the CPUs it may run on) "
        "(default {default})",
        at_least(0, int),
        "N",
        convert=workers_setting,
        only="node",
    ),
    *QOS_SETTINGS,
    *RPC_TLS_SETTINGS,
    *TXN_SETTINGS,  # the transaction coordinator: Kafka's own settings
)

CONFIG_HELP = (
    "a properties file of settings (key=value lines, Kafka's names where Kafka has "
    "one, e.g. node.id=3); each option below names its key and its environment "
    "variable. A flag wins over the environment, which wins over the file "
    "(default: $ZONEGATE_CONFIG, else none)"
)


def of_command(command: str) -> list[Setting]:
    return [s for s in SETTINGS if s.only in (None, command)]


def add_settings(parser: argparse.ArgumentParser, command: str, unset: object) -> None:
    """Adds the command's settings as options defaulting to `unset`, so that a flag given
    is told from one not given (config_file.resolve fills the others), and `--config`."""
    settings = of_command(command)
    for s in settings:
        extra: dict[str, Any] = {"metavar": s.metavar} if s.metavar else {}
        if s.type is not None:
            extra["type"] = s.type
        parser.add_argument(
            s.flag,
            choices=s.choices,
            default=unset,
            help=f"{s.help_for(command)}. Config file: {s.key}; environment: {s.env}",
            **extra,
        )
    parser.add_argument("--config", metavar="FILE", default=None, help=CONFIG_HELP)
    parser.set_defaults(settings=settings)


def field_default(name: str) -> Any:
    """A NodeConfig field's default: what its setting's default sets it to."""
    for s in SETTINGS:
        fields = s.node_fields(s.default)
        if name in fields:
            return fields[name]
    raise KeyError(f"no setting sets NodeConfig.{name}")


def node_fields(settings: Sequence[Setting], args: argparse.Namespace) -> dict[str, Any]:
    """The NodeConfig fields the parsed settings set; ValueError names a refused one."""
    fields: dict[str, Any] = {}
    for s in settings:
        fields.update(s.node_fields(getattr(args, s.dest)))
    return fields
