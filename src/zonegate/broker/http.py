"""The node's HTTP endpoint: Prometheus `/metrics`, `/healthz` and `/readyz`.

A few lines of asyncio rather than a web framework: three GET paths, no body.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest


class HttpEndpoint:
    def __init__(
        self, registry: CollectorRegistry, ready: Callable[[], bool], host: str, port: int
    ) -> None:
        self._registry = registry
        self._ready = ready
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

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
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode("latin-1").split()
            path = parts[1] if len(parts) > 1 else ""
            if path == "/metrics":
                status, body, ctype = "200 OK", generate_latest(self._registry), "text/plain"
            elif path == "/healthz":
                status, body, ctype = "200 OK", b"ok\n", "text/plain"
            elif path == "/readyz":
                ok = self._ready()
                status = "200 OK" if ok else "503 Service Unavailable"
                body, ctype = (b"ready\n" if ok else b"not ready\n"), "text/plain"
            else:
                status, body, ctype = "404 Not Found", b"not found\n", "text/plain"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
