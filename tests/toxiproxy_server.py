"""Toxiproxy's server for network-fault tests, and a small client of its HTTP API.

The server is the binary tests/toxiproxy/build.sh compiles into .cache/toxiproxy
(scripts/test runs it); a test that finds no binary fails, saying so. Each proxy
listens on a port of its own and forwards to one upstream; toxics (latency,
reset_peer, timeout, bandwidth, ...) are added to and removed from a proxy while
connections run, both directions or one.

The client speaks Toxiproxy's HTTP API over urllib rather than through the
toxiproxy-python package: that package's last release (0.1.1) is from 2019, it
pulls in requests and future, and the few calls the tests make (create a proxy,
add or remove a toxic, reset) are a dozen lines here.

    with ToxiproxyServer() as toxi:
        p = toxi.proxy("node1-s3", upstream="127.0.0.1:9000")   # p.listen: HOST:PORT
        toxi.add_toxic("node1-s3", "slow", "latency", {"latency": 100})
        toxi.reset()   # every proxy enabled, every toxic gone
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

BINARY = Path(__file__).resolve().parents[1] / ".cache" / "toxiproxy" / "bin" / "toxiproxy-server"


@dataclass(frozen=True)
class Proxy:
    name: str
    listen: str  # HOST:PORT clients dial
    upstream: str  # HOST:PORT it forwards to

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ToxiproxyServer:
    def __init__(self, log_path: Path | None = None) -> None:
        if not BINARY.exists():
            pytest.fail(f"{BINARY} is missing: run tests/toxiproxy/build.sh (scripts/test does)")
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> None:
        self.port = _free_port()
        log = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen(
            [str(BINARY), "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=log,
            stderr=log,
            # Its default logs every read and write of every link (trace, debug): 35,000
            # lines and 13 MB in one fault scenario, CPU taken from the cluster it proxies.
            env={**os.environ, "LOG_LEVEL": "info"},
        )
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._call("GET", "/version")
                return
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"toxiproxy did not answer on port {self.port}") from None
                time.sleep(0.05)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.api + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                text = resp.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"toxiproxy {method} {path}: {exc.code} {exc.read()!r}") from None
        return json.loads(text) if text.strip().startswith((b"{", b"[")) else text

    def proxy(self, name: str, upstream: str, listen: str = "127.0.0.1:0") -> Proxy:
        """A new proxy to `upstream`; port 0: any free port, which it keeps."""
        answer = self._call(
            "POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream}
        )
        return Proxy(name, answer["listen"], answer["upstream"])

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Disabled, a proxy closes its connections and refuses new ones."""
        self._call("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(
        self,
        proxy: str,
        name: str,
        kind: str,
        attributes: dict[str, int | float],
        *,
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> None:
        """A toxic on `proxy`: `stream` downstream is what the upstream sends back to the
        client, upstream what the client sends; `toxicity` the share of connections hit."""
        self._call(
            "POST",
            f"/proxies/{proxy}/toxics",
            {
                "name": name,
                "type": kind,
                "stream": stream,
                "toxicity": toxicity,
                "attributes": attributes,
            },
        )

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self._call("GET", f"/proxies/{proxy}/toxics")
        return answer

    def reset(self) -> None:
        """Every proxy enabled again, every toxic removed."""
        self._call("POST", "/reset")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> ToxiproxyServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
