"""Checks of a node's settings before anything starts, each failure one sentence.

A port in use, a data directory that cannot be written or a URL that names no
usable store would otherwise surface as a traceback from deep inside the start
(or, for a bad S3 endpoint, only at the first produce). The CLI prints the
`StartupError` message on one line and exits with status 2.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

from zonegate.broker.config import NodeConfig
from zonegate.broker.listeners import ListenerSpec
from zonegate.proxy.tls import TlsSettingsError, build_context


class StartupError(Exception):
    """A setting the node cannot start with; the message names the setting and the fix."""


def check_writable_dir(path: Path, what: str) -> None:
    """Create `path` if need be and prove a file can be written in it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        # os.access says yes to root on a read-only file system; writing says the truth.
        with tempfile.NamedTemporaryFile(dir=path, prefix=".zonegate-write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise StartupError(f"cannot write the {what} {path}: {reason.lower()}") from None


def check_store_url(url: str) -> None:
    """`file:///absolute/dir` (created if missing) or `s3://bucket[/prefix]`."""
    parts = urlsplit(url)
    usage = "use file:///absolute/path or s3://bucket/prefix"
    if parts.scheme == "file":
        path = unquote(parts.path)
        if parts.netloc not in ("", "localhost") or not os.path.isabs(path):
            raise StartupError(
                f"--object-store {url!r} does not name an absolute local path: {usage}"
            )
        check_writable_dir(Path(path), "object store directory")
    elif parts.scheme == "s3":
        if not parts.netloc:
            raise StartupError(f"--object-store {url!r} names no bucket: {usage}")
    else:
        raise StartupError(f"--object-store {url!r} is not a supported store URL: {usage}")


def check_metastore_url(url: str) -> None:
    """`sqlite:///path/to/meta.db`, whose directory can be written, or
    `postgresql://[user[:password]@]host[:port]/database` (reached at start)."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            raise StartupError(
                f"--metastore {_redacted(url)!r}: the port is not a number"
            ) from None
        if not parts.hostname and "host=" not in parts.query:
            raise StartupError(f"--metastore {_redacted(url)!r} names no host")
        return
    if not url.startswith("sqlite://") or url == "sqlite://":
        raise StartupError(
            f"--metastore {_redacted(url)!r} is not a supported metadata store URL: use "
            "sqlite:///path/meta.db or postgresql://user@host:port/database"
        )
    path = Path(url.removeprefix("sqlite://"))
    if path.is_dir():
        raise StartupError(f"--metastore {url!r} is a directory: name the database file in it")
    check_writable_dir(path.parent, "metadata store directory")


def check_endpoint_url(url: str, option: str = "--s3-endpoint") -> None:
    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise StartupError(f"{option} {url!r} is not an http:// or https:// URL with a host")


def check_bindable(host: str, port: int, what: str) -> None:
    """Bind and release HOST:PORT as the listener would (port 0: any free port of HOST)."""
    if not 0 <= port < 65536:
        raise StartupError(f"{what}: {port} is not a TCP port (1-65535, or 0 for any free one)")
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise StartupError(f"{what} host {host!r} does not resolve: {exc.strerror}") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        # asyncio's listeners set SO_REUSEADDR too, so a port in TIME_WAIT is not "in use".
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as exc:
            raise StartupError(bind_failure(host, port, what, exc)) from None


def bind_failure(host: str, port: int, what: str, exc: OSError) -> str:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where} ({what}): the address is in use, perhaps by another "
            "zonegate; stop it or choose other ports"
        )
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where} ({what}): permission denied (ports below 1024?)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where} ({what}): {host} is not an address of this machine"
    return f"cannot listen on {where} ({what}): {(exc.strerror or str(exc)).lower()}"


def check_config(c: NodeConfig, *, listen_option: str = "--listen") -> None:
    """Every check above that applies to one node's configuration."""
    check_writable_dir(c.data_dir, "data directory (--data-dir)")
    check_store_url(c.store_url)
    check_metastore_url(c.meta_url)
    if c.s3_endpoint:
        check_endpoint_url(c.s3_endpoint)
    for spec in c.kafka_listeners:
        check_bindable(
            spec.host, spec.port, f"zone {c.zone}'s Kafka listener {spec.name}, {listen_option}"
        )
        check_tls(spec)
    if c.rpc_port:
        check_bindable(c.rpc_host or c.host, c.rpc_port, f"zone {c.zone}'s --rpc-listen")
    if c.http_port:
        check_bindable(c.host, c.http_port, f"zone {c.zone}'s --http-port")


def check_tls(spec: ListenerSpec) -> None:
    """The listener's certificate, key and CA files load (and match)."""
    if spec.tls is None:
        return
    try:
        build_context(spec.tls)
    except TlsSettingsError as exc:
        raise StartupError(f"listener {spec.name}: {exc}") from None


def _redacted(url: str) -> str:
    """The URL with its password hidden: error lines end up in logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
