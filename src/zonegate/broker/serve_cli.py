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
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zonegate.broker import inter_broker
from zonegate.broker.config import NodeConfig
from zonegate.broker.config_file import UNSET, resolve
from zonegate.broker.listeners import ListenerSpec, listeners_from_args
from zonegate.broker.qos_flags import qos_from_args
from zonegate.broker.settings import add_settings, node_fields
from zonegate.broker.startup import StartupError, bind_failure, check_config, check_writable_dir
from zonegate.metastore.models import MetaStoreError

if TYPE_CHECKING:
    from zonegate.broker.node import Node


_HEARTBEAT_MS = 500  # lease renewals and controller passes


class _ZoneOnServe(argparse.Action):
    """`serve --zone Z`: say which option was meant instead of "unrecognized argument"."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.error(
            "serve runs one node per zone and takes --zones ZONE,... "
            "(--zone ZONE is for zonegate node)"
        )


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
    add_settings(p, "serve", UNSET)
    p.add_argument("--zone", action=_ZoneOnServe, help=argparse.SUPPRESS)
    p.set_defaults(func=run_serve)
    p = subparsers.add_parser(
        "node",
        usage="%(prog)s --zone ZONE --node-id ID [OPTIONS]",
        help="run one node of a cluster",
        description="Run one node of a cluster: every node of the cluster shares one "
        "--metastore and one --object-store, and has its own --node-id and --zone.",
    )
    add_settings(p, "node", UNSET)
    p.set_defaults(func=run_node)


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    """The node's configuration from its resolved settings (config_file.resolve), each
    setting into its field (settings.py), after the checks that span settings."""
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
    try:
        listeners = listeners_from_args(args)
        first = listeners[0]
        if listeners == (ListenerSpec("PLAINTEXT", "PLAINTEXT", first.host, first.port),):
            listeners = ()  # the one PLAINTEXT listener of host:port: NodeConfig's default
        return NodeConfig(
            **node_fields(args.settings, args),
            listeners=listeners,
            kafka_no_effect=tuple(inter_broker.shown(args, args.listener_setting).items()),
            heartbeat_s=_HEARTBEAT_MS / 1000,
            qos=qos_from_args(args),
        )
    except ValueError as exc:  # a value its setting could not convert (settings.py)
        raise StartupError(str(exc)) from None


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
    except StartupError as exc:
        print(f"zonegate node: {exc}", file=sys.stderr)
        return 2
    before = _Before.look(args.data_dir)
    try:
        config = config_from_args(args)
        check_config(config)
    except StartupError as exc:
        print(f"zonegate node: {exc}", file=sys.stderr)
        before.restore()
        return 2
    result = _run("node", args, [config])
    if result == 2:  # refused at start: nothing was served
        before.restore()
    return result


def serve_configs(args: argparse.Namespace) -> list[NodeConfig]:
    """One node per zone sharing the metadata store and the object store under --data-dir."""
    base = config_from_args(args)
    zones = [z.strip() for z in args.zones.split(",") if z.strip()]
    if not zones or len(set(zones)) != len(zones):
        raise StartupError(f"--zones must name distinct zones, got {args.zones!r}")
    configs = []
    for i, zone in enumerate(zones):
        listeners = base.shifted(i)
        configs.append(
            dataclasses.replace(
                base,
                zone=zone,
                node_id=base.node_id + i,
                port=listeners[0].port,
                listeners=listeners,
                http_port=_serve_http_port(base, i),
                data_dir=base.data_dir / f"node-{base.node_id + i}",
                object_store_url=base.store_url,
                metastore_url=base.meta_url,
            )
        )
    _distinct_ports(configs)
    return configs


SERVE_HTTP_OFFSET = 100  # serve's /metrics: the Kafka port + 100 (9192, 9193, 9194)


def _serve_http_port(base: NodeConfig, i: int) -> int:
    """Zone i's /metrics port: --http-port + i, or by default the Kafka port + 100 + i, so
    the embedded default shows its metrics without an option (ephemeral when the Kafka
    ports are)."""
    if base.http_port is not None:
        return base.http_port + i if base.http_port else 0
    return base.port + SERVE_HTTP_OFFSET + i if base.port else 0


def _distinct_ports(configs: list[NodeConfig]) -> None:
    """Zone i listens on each listener's PORT+i: listeners' ports closer than the number
    of zones would collide (Kafka's 9092 and 9093 on three zones)."""
    taken: dict[int, str] = {}
    for c in configs:
        for spec in c.kafka_listeners:
            if not spec.port:
                continue
            what = f"zone {c.zone}'s listener {spec.name}"
            if spec.port in taken:
                raise StartupError(
                    f"port {spec.port} would be both {taken[spec.port]} and {what} (zone i "
                    f"listens on each port + i): space the listeners' ports at least "
                    f"{len(configs)} apart"
                )
            taken[spec.port] = what


def run_serve(args: argparse.Namespace) -> int:
    try:
        resolve(args, args.settings)
    except StartupError as exc:
        print(f"zonegate serve: {exc}", file=sys.stderr)
        return 2
    before = _Before.look(args.data_dir)
    try:
        # The shared directory first, so a failure names the directory the user gave.
        check_writable_dir(args.data_dir, "data directory (--data-dir)")
        configs = serve_configs(args)
        for i, config in enumerate(configs):
            check_config(config, listen_option=f"--listen port + {i}" if i else "--listen")
    except StartupError as exc:
        print(f"zonegate serve: {exc}", file=sys.stderr)
        before.restore()
        return 2
    result = _run("serve", args, configs)
    if result == 2:  # refused at start: nothing was served
        before.restore()
    return result


@dataclasses.dataclass(frozen=True)
class _Before:
    """The data directory as it was before the command ran: missing, or these entries.

    What a refused start made there (the directory, the nodes' directories, the
    stores in it) goes again, so that fixing the cause and retrying starts clean."""

    data_dir: Path
    entries: frozenset[str] | None  # None: the directory did not exist

    @classmethod
    def look(cls, data_dir: Path) -> _Before:
        if not data_dir.is_dir():
            return cls(data_dir, None)
        return cls(data_dir, frozenset(p.name for p in data_dir.iterdir()))

    def restore(self) -> None:
        """Removes what appeared since: all of it if the directory was new."""
        if self.entries is None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            return
        for path in self.data_dir.iterdir():
            if path.name in self.entries:
                continue
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


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
