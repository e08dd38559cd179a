"""`zonegate serve` (the embedded default) and `zonegate node` (one node of a cluster)."""

from __future__ import annotations

import argparse
import asyncio
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
    p.add_argument("--log-level", default=os.environ.get("ZONEGATE_LOG_LEVEL", "INFO"))


def register(subparsers: Any) -> None:
    for name, text in (
        ("serve", "run the embedded default: a node with a local object store and SQLite"),
        ("node", "run one node of a cluster"),
    ):
        p = subparsers.add_parser(name, help=text, description=text)
        _add_node_args(p)
        p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    host, port = args.listen
    return NodeConfig(
        data_dir=args.data_dir,
        host=host,
        port=port,
        advertised_host=args.advertised_host,
        node_id=args.node_id,
        zone=args.zone,
        cluster_id=args.cluster_id,
        object_store_url=args.object_store,
        s3_endpoint=args.s3_endpoint,
        metastore_url=args.metastore,
        wal_seal_bytes=args.wal_seal_bytes,
        wal_seal_age_ms=args.wal_seal_age_ms,
        auto_create_topics=args.auto_create_topics == "true",
        default_partitions=args.num_partitions,
        max_request_bytes=args.max_request_bytes,
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    config = config_from_args(args)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency
        pass
    return asyncio.run(_serve(config))


async def _serve(config: NodeConfig) -> int:
    from zonegate.broker.node import Node

    node = Node(config)
    await node.start()
    print(f"zonegate listening on {config.host}:{node.port}", flush=True)
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
    await node.stop()
    return 0
