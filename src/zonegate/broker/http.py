"""The node's HTTP endpoint: Prometheus `/metrics`, `/healthz` and `/readyz`.

A few lines of asyncio rather than a web framework: three GET paths, no body.
Whatever a client sends, the endpoint reads at most 8 KiB of it within 10 s,
holds at most 64 connections, and answers or closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, generate_latest

# Probes and scrapers send a few hundred bytes and read the answer at once; more
# than this, or slower, is not one of them.
_MAX_HEAD_BYTES = 8192
_REQUEST_TIMEOUT_S = 10.0
_MAX_CONNECTIONS = 64


class HttpEndpoint:
    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        host: str,
        port: int,
        combine: Callable[[bytes], Awaitable[bytes]] | None = None,
    ) -> None:
        """`combine`: the node's one /metrics from this process's (its workers' added in,
        docs/cores.md)."""
        self._registry = registry
        self._combine = combine
        self._ready = ready
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._open = 0

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= _MAX_CONNECTIONS:
            writer.close()  # a flood: the probes and the scraper come back
            return
        self._open += 1
        try:
            path = await asyncio.wait_for(_read_request_path(reader), _REQUEST_TIMEOUT_S)
            if path == "/metrics":
                body = generate_latest(self._registry)
                if self._combine is not None:
                    body = await self._combine(body)
                status, ctype = "200 OK", "text/plain"
            elif path == "/healthz":
                status, body, ctype = "200 OK", b"ok\n", "text/plain"
            elif path == "/readyz":
                ok = self._ready()
                status = "200 OK" if ok else "503 Service Unavailable"
                body, ctype = (b"ready\n" if ok else b"not ready\n"), "text/plain"
            elif path is None:
                status, body, ctype = "400 Bad Request", b"bad request\n", "text/plain"
            else:
                status, body, ctype = "404 Not Found", b"not found\n", "text/plain"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await asyncio.wait_for(writer.drain(), _REQUEST_TIMEOUT_S)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away or stalled: nothing to answer
        finally:
            self._open -= 1
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def _read_request_path(reader: asyncio.StreamReader) -> str | None:
    """The path of a GET request line, None for anything else; reads the header lines
    through, at most `_MAX_HEAD_BYTES` of them, so a client cannot make us buffer more."""
    head = b""
    while not head.endswith((b"\r\n\r\n", b"\n\n")):
        chunk = await reader.read(_MAX_HEAD_BYTES - len(head))
        if not chunk:
            break
        head += chunk
        if len(head) >= _MAX_HEAD_BYTES:
            return None
    parts = head.split(b"\n", 1)[0].decode("latin-1").split()
    if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
        return None
    return parts[1]
