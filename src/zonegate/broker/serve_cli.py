"""`zonegate serve` (the embedded default) and `zonegate node` (one node of a cluster)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import errno
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zonegate.broker.config import NodeConfig
from zonegate.broker.config_file import layered, resolve
from zonegate.broker.qos_flags import (
    add_memory_args,
    add_qos_args,
    add_quota_args,
    qos_from_args,
)
from zonegate.broker.startup import StartupError, bind_failure, check_config, check_writable_dir
from zonegate.metastore.models import MetaStoreError

if TYPE_CHECKING:
    from zonegate.broker.node import Node


def _node_id(text: str) -> int:
    """A number, or `from-ip:ADDRESS` (the DaemonSet's: broker/k8s_node.py)."""
    if text.startswith("from-ip:"):
        from zonegate.broker.k8s_node import NodeIdentityError, node_id_from_ip

        try:
            return node_id_from_ip(text)
        except NodeIdentityError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    value: int = _at_least(0, int)(text)
    if value > (1 << 31) - 1:
        raise argparse.ArgumentTypeError(f"must be at most {(1 << 31) - 1} (Kafka's broker ids)")
    return value


_node_id.__name__ = "int"


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "0.0.0.0", int(port)


def _at_least(lo: float, kind: type[int] | type[float]) -> Any:
    """An argparse type: a number of `kind`, refused by name when below `lo`."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo:g}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_HEARTBEAT_MS = 500  # lease renewals and controller passes


def _log_level(text: str) -> str:
    if text.upper() not in _LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(_LOG_LEVELS)} (any case), got {text!r}"
        )
    return text.upper()


class _ZoneOnServe(argparse.Action):
    """`serve --zone Z`: say which option was meant instead of "unrecognized argument"."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.error(
            "serve runs one node per zone and takes --zones ZONE,... "
            "(--zone ZONE is for zonegate node)"
        )


def _add_node_args(p: argparse.ArgumentParser, *, embedded: bool) -> None:
    """Options of `serve` (embedded=True: one node per zone) and of `node` (one node)."""
    if embedded:
        listen_help = (
            "Kafka listener HOST:PORT of the first zone's node; zone i listens on PORT+i "
            "(default 127.0.0.1:9092, so 9092, 9093, 9094; port 0: any free ports)"
        )
        data_help = (
            "where the nodes keep their data: DATA_DIR/objects (object store), "
            "DATA_DIR/meta.db (metadata store), DATA_DIR/node-N (default ./zonegate-data)"
        )
        node_id_help = "id of the first zone's node; zone i's node gets ID+i (default 1)"
        http_help = (
            "port for /metrics, /healthz, /readyz on the first zone's node, PORT+i on zone i's "
            "(default: no HTTP endpoint)"
        )
    else:
        listen_help = "Kafka listener HOST:PORT (default 127.0.0.1:9092)"
        data_help = "where the node keeps its data (default ./zonegate-data)"
        node_id_help = (
            "this node's id, unique in the cluster; from-ip:ADDRESS makes it from the "
            "machine's IP address (default 1)"
        )
        http_help = "port for /metrics, /healthz, /readyz (default: no HTTP endpoint)"
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        type=_host_port,
        default=("127.0.0.1", 9092),
        help=listen_help,
    )
    p.add_argument(
        "--advertised-host",
        metavar="HOST",
        default=None,
        help="host name given to clients in Metadata (default: the listen host)",
    )
    p.add_argument(
        "--data-dir", metavar="DATA_DIR", type=Path, default=Path("./zonegate-data"), help=data_help
    )
    p.add_argument(
        "--object-store",
        metavar="URL",
        default=None,
        help="where WAL objects and usage records go: file:///absolute/path or "
        "s3://bucket/prefix (default file://DATA_DIR/objects)",
    )
    p.add_argument(
        "--s3-endpoint",
        metavar="URL",
        default=None,
        help="S3 endpoint URL for an s3:// object store, e.g. http://minio:9000 (default: AWS's)",
    )
    p.add_argument(
        "--metastore",
        metavar="URL",
        default=None,
        help="metadata store: sqlite:///path/meta.db, or postgresql://user:password@host:port/"
        "database shared by nodes on several machines (default sqlite:///DATA_DIR/meta.db)",
    )
    p.add_argument("--node-id", metavar="ID", type=_node_id, default=1, help=node_id_help)
    if embedded:
        p.add_argument("--zone", action=_ZoneOnServe, help=argparse.SUPPRESS)
        p.add_argument(
            "--zones",
            metavar="ZONE,...",
            default="zone-a,zone-b,zone-c",
            help="comma-separated zone names, one node each; one name runs a single node "
            "(default zone-a,zone-b,zone-c)",
        )
    else:
        p.add_argument(
            "--zone",
            metavar="ZONE",
            default="zone-a",
            help="this node's availability zone; clients are served by nodes of their own "
            "zone; from-node-label: the Kubernetes machine's topology.kubernetes.io/zone "
            "label (default zone-a)",
        )
    p.add_argument(
        "--cluster-id",
        metavar="NAME",
        default="zonegate",
        help="cluster name, the same on every node: Kafka's cluster id is derived from it and "
        "usage records carry it (default zonegate)",
    )
    p.add_argument(
        "--group-min-session-timeout-ms",
        metavar="MS",
        type=_at_least(0, int),
        default=6000,
        help="group.min.session.timeout.ms (default 6000)",
    )
    p.add_argument(
        "--group-max-session-timeout-ms",
        metavar="MS",
        type=_at_least(0, int),
        default=1_800_000,
        help="group.max.session.timeout.ms (default 1800000)",
    )
    p.add_argument(
        "--group-initial-rebalance-delay-ms",
        metavar="MS",
        type=_at_least(0, int),
        default=3000,
        help="group.initial.rebalance.delay.ms: how long a new group waits for more members "
        "before its first rebalance (default 3000)",
    )
    p.add_argument(
        "--group-consumer-heartbeat-interval-ms",
        metavar="MS",
        type=_at_least(1, int),
        default=5000,
        help="group.consumer.heartbeat.interval.ms: how often KIP-848 consumers heartbeat "
        "(default 5000)",
    )
    p.add_argument(
        "--group-consumer-session-timeout-ms",
        metavar="MS",
        type=_at_least(1, int),
        default=45000,
        help="group.consumer.session.timeout.ms: a KIP-848 consumer silent this long leaves "
        "the group (default 45000)",
    )
    p.add_argument(
        "--wal-seal-bytes",
        metavar="BYTES",
        type=_at_least(1, int),
        default=8 * 1024 * 1024,
        help="seal and upload a WAL object when it holds this many bytes (default 8388608, 8 MiB)",
    )
    p.add_argument(
        "--block-cache-bytes",
        metavar="BYTES",
        type=_at_least(0, int),
        default=256 * 1024 * 1024,
        help="each node's cache of 1 MiB blocks of stream objects, read ahead for catch-up "
        "consumers (docs/storage.md; default 268435456, 256 MiB; 0 turns it off)",
    )
    p.add_argument(
        "--wal-seal-age-ms",
        metavar="MS",
        type=_at_least(0, float),
        default=None,
        help="seal and upload a WAL object at this age at the latest (default 250 on S3, "
        "2 on a local directory)",
    )
    p.add_argument(
        "--wal-seal-when-idle",
        choices=("true", "false"),
        default="true",
        help="seal a WAL object at once when no upload is in flight (group commit; the "
        "seal age and size stay upper bounds); false: wait for the age or size (default true)",
    )
    p.add_argument(
        "--auto-create-topics",
        choices=("true", "false"),
        default="true",
        help="auto.create.topics.enable (default true)",
    )
    p.add_argument(
        "--num-partitions",
        metavar="N",
        type=_at_least(1, int),
        default=1,
        help="partitions of auto-created topics, num.partitions (default 1)",
    )
    p.add_argument(
        "--max-request-bytes",
        metavar="BYTES",
        type=_at_least(1, int),
        default=104_857_600,
        help="largest request accepted, socket.request.max.bytes (default 104857600)",
    )
    p.add_argument(
        "--rpc-listen",
        metavar="HOST:PORT",
        type=_host_port,
        default=None,
        help="leader gRPC listener HOST:PORT (default: the Kafka host, any free port)",
    )
    p.add_argument(
        "--http-port", metavar="PORT", type=_at_least(0, int), default=None, help=http_help
    )
    p.add_argument(
        "--lease-ms",
        metavar="MS",
        type=_at_least(1, int),
        default=6000,
        help="node and controller lease: a node silent this long has its partitions moved "
        "to live nodes (default 6000)",
    )
    p.add_argument(
        "--zone-routing",
        choices=("true", "false"),
        default="true",
        help="answer Metadata with nodes of the client's zone only; false: the real leaders, "
        "as plain Kafka (default true)",
    )
    p.add_argument(
        "--zone-map",
        metavar="CIDR=ZONE,...",
        default="",
        help="client source CIDR to zone, for clients whose client.id names no zone: "
        "10.0.1.0/24=zone-a,10.0.2.0/24=zone-b (default: none; such clients are in the "
        "zone of the node they reach)",
    )
    p.add_argument(
        "--usage-interval-s",
        metavar="SECONDS",
        type=_at_least(0.001, float),
        default=60.0,
        help="how often each node writes its usage records (docs/usage-records.md) under "
        "usage/ in the object store, and once more when it stops (default 60)",
    )
    p.add_argument(
        "--log-retention-check-interval-ms",
        metavar="MS",
        type=_at_least(1, int),
        default=30_000,
        help="log.retention.check.interval.ms: how often each node applies its partitions' "
        "retention.ms and retention.bytes (default 30000; Kafka's is 300000, docs/storage.md)",
    )
    p.add_argument(
        "--log-segment-delete-delay-ms",
        metavar="MS",
        type=_at_least(0, int),
        default=60_000,
        help="log.segment.delete.delay.ms: how long an object no index entry names any more "
        "is kept before object GC deletes it, for readers still in flight (default 60000)",
    )
    p.add_argument(
        "--gc-interval-ms",
        metavar="MS",
        type=_at_least(1, int),
        default=60_000,
        help="how often the controller's object GC lists the WAL objects and deletes what "
        "nothing names (default 60000)",
    )
    p.add_argument(
        "--gc-orphan-grace-ms",
        metavar="MS",
        type=_at_least(0, int),
        default=600_000,
        help="how long after its upload an object never committed (a node killed between its "
        "PUT and its commit) is kept before GC may delete it (default 600000: longer than any "
        "commit can still be retried)",
    )
    p.add_argument(
        "--compaction-interval-ms",
        metavar="MS",
        type=_at_least(1, int),
        default=5_000,
        help="how often each node looks for WAL ranges of the partitions it leads to rewrite "
        "into stream objects (default 5000; docs/storage.md)",
    )
    p.add_argument(
        "--stream-object-bytes",
        metavar="BYTES",
        type=_at_least(1, int),
        default=16 * 1024 * 1024,
        help="a partition's data still in WAL objects is rewritten into a stream object once "
        "it reaches this much (or the topic's smaller segment.bytes); the largest stream "
        "object compaction writes (default 16777216)",
    )
    p.add_argument(
        "--compaction-max-delay-ms",
        metavar="MS",
        type=_at_least(0, int),
        default=540_000,
        help="data is rewritten out of WAL objects once it waited min(segment.ms, this), "
        "at the next compaction pass (default 540000: by default nothing stays in a WAL "
        "object 10 minutes)",
    )
    p.add_argument(
        "--usage-retention-days",
        metavar="DAYS",
        type=_at_least(1, int),
        default=30,
        help="usage records older than this are deleted by object GC (default 30)",
    )
    p.add_argument(
        "--log-level",
        metavar="LEVEL",
        type=_log_level,
        default="INFO",
        help="DEBUG, INFO, WARNING or ERROR; logs go to stderr (default INFO)",
    )
    p.add_argument(
        "--drain-timeout-ms",
        metavar="MS",
        type=_at_least(0, int),
        default=10000,
        help="on SIGTERM, how long the node waits for the requests it accepted to be "
        "answered before it closes their connections (default 10000); a second signal "
        "exits at once",
    )
    add_qos_args(p)
    add_quota_args(p)
    add_memory_args(p)
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="a properties file of settings (key=value lines, Kafka's names where Kafka has "
        "one, e.g. node.id=3); each option below names its key and its environment "
        "variable. A flag wins over the environment, which wins over the file "
        "(default: $ZONEGATE_CONFIG, else none)",
    )
    p.set_defaults(settings=layered(p))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        usage="%(prog)s [OPTIONS]",
        help="run the embedded default: one node per zone in one process",
        description="The embedded default: one node per zone (three by default) in one "
        "process, sharing a local-directory object store and a SQLite metadata store under "
        "--data-dir. Zone i listens on the --listen port + i (all ephemeral when the port is "
        "0). Stop it with Ctrl-C (SIGINT) or SIGTERM; it finishes what it accepted and writes "
        "its last usage records.",
    )
    _add_node_args(p, embedded=True)
    p.set_defaults(func=run_serve)
    p = subparsers.add_parser(
        "node",
        usage="%(prog)s --zone ZONE --node-id ID [OPTIONS]",
        help="run one node of a cluster",
        description="Run one node of a cluster: every node of the cluster shares one "
        "--metastore and one --object-store, and has its own --node-id and --zone.",
    )
    _add_node_args(p, embedded=False)
    p.set_defaults(func=run_node)


def _zone_cidrs(spec: str) -> tuple[tuple[str, str], ...]:
    import ipaddress

    from zonegate.router.zones import parse_cidr_map

    try:
        cidrs = parse_cidr_map(spec)
        for cidr in cidrs:
            ipaddress.ip_network(cidr, strict=False)
    except ValueError as exc:
        raise StartupError(f"--zone-map {spec!r}: {exc}") from None
    return tuple(cidrs.items())


def _zone(value: str) -> str:
    if value != "from-node-label":
        return value
    from zonegate.broker.k8s_node import NodeIdentityError, zone_from_node_label

    try:
        return zone_from_node_label()
    except NodeIdentityError as exc:
        raise StartupError(f"--zone from-node-label: {exc}") from None


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    if args.group_min_session_timeout_ms > args.group_max_session_timeout_ms:
        raise StartupError(
            f"group.min.session.timeout.ms ({args.group_min_session_timeout_ms}) is above "
            f"group.max.session.timeout.ms ({args.group_max_session_timeout_ms})"
        )
    if args.lease_ms < 4 * _HEARTBEAT_MS:
        raise StartupError(
            f"--lease-ms {args.lease_ms} is shorter than four heartbeats "
            f"({4 * _HEARTBEAT_MS} ms): live nodes would be taken for dead"
        )
    host, port = args.listen
    rpc_host, rpc_port = args.rpc_listen or (host, 0)
    return NodeConfig(
        data_dir=args.data_dir,
        host=host,
        port=port,
        rpc_host=rpc_host,
        rpc_port=rpc_port,
        http_port=args.http_port,
        lease_ms=args.lease_ms,
        zone_routing=args.zone_routing == "true",
        zone_cidrs=_zone_cidrs(args.zone_map),
        usage_interval_s=args.usage_interval_s,
        retention_check_interval_ms=args.log_retention_check_interval_ms,
        segment_delete_delay_ms=args.log_segment_delete_delay_ms,
        gc_interval_ms=args.gc_interval_ms,
        gc_orphan_grace_ms=args.gc_orphan_grace_ms,
        usage_retention_days=args.usage_retention_days,
        compaction_interval_ms=args.compaction_interval_ms,
        stream_object_bytes=args.stream_object_bytes,
        compaction_max_delay_ms=args.compaction_max_delay_ms,
        advertised_host=args.advertised_host,
        node_id=args.node_id,
        zone=_zone(getattr(args, "zone", "zone-a")),  # serve has --zones instead
        cluster_id=args.cluster_id,
        object_store_url=args.object_store,
        s3_endpoint=args.s3_endpoint,
        metastore_url=args.metastore,
        wal_seal_bytes=args.wal_seal_bytes,
        block_cache_bytes=args.block_cache_bytes,
        wal_seal_age_ms=args.wal_seal_age_ms,
        wal_seal_when_idle=args.wal_seal_when_idle == "true",
        auto_create_topics=args.auto_create_topics == "true",
        default_partitions=args.num_partitions,
        max_request_bytes=args.max_request_bytes,
        queued_max_request_bytes=args.queued_max_request_bytes,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_connections_per_ip,
        group_min_session_timeout_ms=args.group_min_session_timeout_ms,
        group_max_session_timeout_ms=args.group_max_session_timeout_ms,
        group_initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
        group_consumer_heartbeat_interval_ms=args.group_consumer_heartbeat_interval_ms,
        group_consumer_session_timeout_ms=args.group_consumer_session_timeout_ms,
        drain_timeout_s=args.drain_timeout_ms / 1000,
        heartbeat_s=_HEARTBEAT_MS / 1000,
        qos=qos_from_args(args),
        qos_tail_window_ms=args.qos_tail_window_ms,
        quota_window_num=args.quota_window_num,
        quota_window_size_s=args.quota_window_size_seconds,
    )


def _setup(args: argparse.Namespace) -> None:
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    import uvloop

    uvloop.install()


def _run(command: str, args: argparse.Namespace, configs: list[NodeConfig]) -> int:
    _setup(args)
    try:
        return asyncio.run(_serve(configs))
    except StartupError as exc:
        print(f"zonegate {command}: {exc}", file=sys.stderr)
        return 2


def run_node(args: argparse.Namespace) -> int:
    try:
        resolve(args, args.settings)
        config = config_from_args(args)
        check_config(config)
    except StartupError as exc:
        print(f"zonegate node: {exc}", file=sys.stderr)
        return 2
    return _run("node", args, [config])


def serve_configs(args: argparse.Namespace) -> list[NodeConfig]:
    """One node per zone sharing the metadata store and the object store under --data-dir."""
    base = config_from_args(args)
    zones = [z.strip() for z in args.zones.split(",") if z.strip()]
    if not zones or len(set(zones)) != len(zones):
        raise StartupError(f"--zones must name distinct zones, got {args.zones!r}")
    configs = []
    for i, zone in enumerate(zones):
        configs.append(
            dataclasses.replace(
                base,
                zone=zone,
                node_id=base.node_id + i,
                port=base.port + i if base.port else 0,
                http_port=(base.http_port + i if base.http_port else base.http_port),
                data_dir=base.data_dir / f"node-{base.node_id + i}",
                object_store_url=base.store_url,
                metastore_url=base.meta_url,
            )
        )
    return configs


def run_serve(args: argparse.Namespace) -> int:
    try:
        resolve(args, args.settings)
        # The shared directory first, so a failure names the directory the user gave.
        check_writable_dir(args.data_dir, "data directory (--data-dir)")
        configs = serve_configs(args)
        for i, config in enumerate(configs):
            check_config(config, listen_option=f"--listen port + {i}" if i else "--listen")
    except StartupError as exc:
        print(f"zonegate serve: {exc}", file=sys.stderr)
        return 2
    return _run("serve", args, configs)


async def _start(configs: list[NodeConfig]) -> list[Node]:
    """Start every node, or stop those started and raise `StartupError` saying why not."""
    from zonegate.broker.node import Node

    nodes: list[Node] = []
    try:
        for c in configs:
            nodes.append(Node(c))
            await nodes[-1].start()
    except MetaStoreError as exc:
        # Typically the PostgreSQL server unreachable, or a schema newer than this release.
        c = nodes[-1].config if nodes else configs[0]
        for node in reversed(nodes):
            with contextlib.suppress(Exception):
                await node.stop()
        raise StartupError(f"node {c.node_id}, zone {c.zone} cannot start: {exc}") from None
    except StartupError:
        # Refused by the node itself (its data directory in use, its node id alive).
        for node in reversed(nodes):
            with contextlib.suppress(Exception):
                await node.stop()
        raise
    except OSError as exc:
        # The checks bound every port first; another process may still take one meanwhile.
        c = nodes[-1].config if nodes else configs[0]
        what = f"node {c.node_id}, zone {c.zone}"
        for node in reversed(nodes):
            with contextlib.suppress(Exception):
                await node.stop()
        if exc.errno == errno.EADDRINUSE:
            # The Kafka listener is the usual one; the event loop's message names the address.
            m = re.search(r"\('([^']*)', (\d+)", str(exc))
            host, port = (m.group(1), int(m.group(2))) if m else (c.host, c.port)
            raise StartupError(bind_failure(host, port, what, exc)) from None
        raise StartupError(f"{what} cannot start: {exc}") from None
    return nodes


async def _serve(configs: list[NodeConfig]) -> int:
    nodes = await _start(configs)
    for node in nodes:
        c = node.config
        http = f", http {node.http.port}" if node.http is not None else ""
        print(
            f"zonegate listening on {c.host}:{node.port} (node {c.node_id}, zone {c.zone}{http})",
            flush=True,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            logging.getLogger(__name__).warning("second signal: exiting now")
            os._exit(1)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    fenced = [loop.create_task(n.fenced.wait()) for n in nodes]
    stopping = loop.create_task(stop.wait())
    await asyncio.wait([stopping, *fenced], return_when=asyncio.FIRST_COMPLETED)
    for task in (stopping, *fenced):
        task.cancel()
    # Nodes of this process stop together: they hand nothing over to each other.
    ids = {n.config.node_id for n in nodes}
    for n in nodes:
        n.stopping_with = ids - {n.config.node_id}
    await asyncio.gather(*(n.stop() for n in nodes))
    return 1 if any(n.fenced.is_set() for n in nodes) else 0
