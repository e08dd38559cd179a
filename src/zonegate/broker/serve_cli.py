"""`zonegate serve` (the embedded default) and `zonegate node` (one node of a cluster)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from zonegate.broker.config import NodeConfig


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "0.0.0.0", int(port)


def _add_node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--listen",
        type=_host_port,
        default=("127.0.0.1", 9092),
        help="Kafka listener HOST:PORT (default 127.0.0.1:9092)",
    )
    p.add_argument(
        "--advertised-host",
        default=None,
        help="host name given to clients in Metadata (default: the listen host)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("./zonegate-data"),
        help="where the node keeps its data (default ./zonegate-data)",
    )
    p.add_argument(
        "--object-store",
        default=None,
        help="file:///path or s3://bucket/prefix (default file://DATA_DIR/objects)",
    )
    p.add_argument(
        "--s3-endpoint",
        default=os.environ.get("ZONEGATE_S3_ENDPOINT"),
        help="S3 endpoint URL (default: AWS, or $ZONEGATE_S3_ENDPOINT)",
    )
    p.add_argument(
        "--metastore", default=None, help="sqlite:///path (default sqlite:///DATA_DIR/meta.db)"
    )
    p.add_argument("--node-id", type=int, default=1)
    p.add_argument(
        "--group-min-session-timeout-ms",
        type=int,
        default=6000,
        help="group.min.session.timeout.ms (default 6000)",
    )
    p.add_argument(
        "--group-max-session-timeout-ms",
        type=int,
        default=1_800_000,
        help="group.max.session.timeout.ms (default 1800000)",
    )
    p.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=int,
        default=3000,
        help="group.initial.rebalance.delay.ms: how long a new group waits for more members "
        "before its first rebalance (default 3000)",
    )
    p.add_argument(
        "--group-consumer-heartbeat-interval-ms",
        type=int,
        default=5000,
        help="group.consumer.heartbeat.interval.ms: how often KIP-848 consumers heartbeat "
        "(default 5000)",
    )
    p.add_argument(
        "--group-consumer-session-timeout-ms",
        type=int,
        default=45000,
        help="group.consumer.session.timeout.ms: a KIP-848 consumer silent this long leaves "
        "the group (default 45000)",
    )
    p.add_argument("--zone", default="zone-a")
    p.add_argument("--cluster-id", default="zonegate")
    p.add_argument("--wal-seal-bytes", type=int, default=8 * 1024 * 1024)
    p.add_argument(
        "--wal-seal-age-ms",
        type=float,
        default=None,
        help="default 250 on S3, 2 on a local directory",
    )
    p.add_argument(
        "--wal-seal-when-idle",
        choices=("true", "false"),
        default="true",
        help="seal a WAL object at once when no upload is in flight (group commit; the "
        "seal age and size stay upper bounds); false: wait for the age or size",
    )
    p.add_argument(
        "--auto-create-topics",
        choices=("true", "false"),
        default="true",
        help="auto.create.topics.enable (default true)",
    )
    p.add_argument(
        "--num-partitions",
        type=int,
        default=1,
        help="partitions of auto-created topics (num.partitions)",
    )
    p.add_argument(
        "--max-request-bytes", type=int, default=104_857_600, help="socket.request.max.bytes"
    )
    p.add_argument(
        "--rpc-listen",
        type=_host_port,
        default=None,
        help="leader gRPC listener HOST:PORT (default: the Kafka host, any port)",
    )
    p.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="port for /metrics, /healthz, /readyz (default: none)",
    )
    p.add_argument(
        "--lease-ms",
        type=int,
        default=6000,
        help="node and controller lease; a dead node's partitions move within it",
    )
    p.add_argument(
        "--zone-routing",
        choices=("true", "false"),
        default="true",
        help="answer Metadata with same-zone nodes only (false: real leaders, as plain Kafka)",
    )
    p.add_argument(
        "--zone-map",
        default="",
        help="client source CIDR to zone map: 10.0.1.0/24=zone-a,10.0.2.0/24=zone-b",
    )
    p.add_argument(
        "--usage-interval-s",
        type=float,
        default=60.0,
        help="how often usage records are written to the object store",
    )
    p.add_argument("--log-level", default=os.environ.get("ZONEGATE_LOG_LEVEL", "INFO"))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the embedded default: one node per zone in one process",
        description="The embedded default: one node per zone (three by default) in one "
        "process, sharing a local-directory object store and a SQLite metadata store. "
        "Zone i listens on the --listen port + i (all ephemeral when the port is 0).",
    )
    _add_node_args(p)
    p.add_argument(
        "--zones",
        default="zone-a,zone-b,zone-c",
        help="comma-separated zone names, one node each (default zone-a,zone-b,zone-c)",
    )
    p.set_defaults(func=run_serve)
    p = subparsers.add_parser(
        "node", help="run one node of a cluster", description="Run one node of a cluster."
    )
    _add_node_args(p)
    p.set_defaults(func=run_node)


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    from zonegate.router.zones import parse_cidr_map

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
        zone_cidrs=tuple(parse_cidr_map(args.zone_map).items()),
        usage_interval_s=args.usage_interval_s,
        advertised_host=args.advertised_host,
        node_id=args.node_id,
        zone=args.zone,
        cluster_id=args.cluster_id,
        object_store_url=args.object_store,
        s3_endpoint=args.s3_endpoint,
        metastore_url=args.metastore,
        wal_seal_bytes=args.wal_seal_bytes,
        wal_seal_age_ms=args.wal_seal_age_ms,
        wal_seal_when_idle=args.wal_seal_when_idle == "true",
        auto_create_topics=args.auto_create_topics == "true",
        default_partitions=args.num_partitions,
        max_request_bytes=args.max_request_bytes,
        group_min_session_timeout_ms=args.group_min_session_timeout_ms,
        group_max_session_timeout_ms=args.group_max_session_timeout_ms,
        group_initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
        group_consumer_heartbeat_interval_ms=args.group_consumer_heartbeat_interval_ms,
        group_consumer_session_timeout_ms=args.group_consumer_session_timeout_ms,
    )


def _setup(args: argparse.Namespace) -> None:
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    import uvloop

    uvloop.install()


def run_node(args: argparse.Namespace) -> int:
    _setup(args)
    return asyncio.run(_serve([config_from_args(args)]))


def serve_configs(args: argparse.Namespace) -> list[NodeConfig]:
    """One node per zone sharing the metadata store and the object store under --data-dir."""
    base = config_from_args(args)
    zones = [z.strip() for z in args.zones.split(",") if z.strip()]
    if not zones or len(set(zones)) != len(zones):
        raise SystemExit(f"--zones must name distinct zones, got {args.zones!r}")
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
    _setup(args)
    return asyncio.run(_serve(serve_configs(args)))


async def _serve(configs: list[NodeConfig]) -> int:
    from zonegate.broker.node import Node

    nodes = [Node(c) for c in configs]
    for node in nodes:
        await node.start()
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
    await stop.wait()
    await asyncio.gather(*(n.stop() for n in nodes))
    return 0
