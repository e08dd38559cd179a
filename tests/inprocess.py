"""Real zonegate nodes in the test's own process: no subprocess to start, same code and ports.

`InProcessNode` runs what `zonegate serve ARGS` runs (one node per zone,
sharing the metadata and object stores under a data directory) on an event
loop in a thread of its own, so that the test's synchronous Kafka clients
talk to it over loopback exactly as to a node process. It answers the same
questions as tests/node_harness.py's `RunningNode` (bootstrap, port, the
log, alive, stop), so a test that never kills its node need not care which
it got. Tests that kill -9 or restart a node keep using processes.
"""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.node_harness import free_port_block
from zonegate.broker.cli import build_parser
from zonegate.broker.config_file import resolve
from zonegate.broker.node import Node
from zonegate.broker.serve_cli import serve_configs

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Capture(logging.Handler):
    """The node's log lines, formatted as the CLI formats them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter(_FORMAT))
        self.buffer = io.StringIO()
        self._lock_ = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        with self._lock_:
            self.buffer.write(line + "\n")


class InProcessNode:
    def __init__(self, data_dir: Path, args: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        self.args = list(args)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._nodes: list[Node] = []
        self._capture = _Capture()
        self._stopped = False
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def nodes(self) -> list[Node]:
        return self._nodes

    def start(self, port: int | None = None, timeout: float = 30) -> InProcessNode:
        base = port or free_port_block()
        parsed = build_parser().parse_args(
            [
                "serve",
                "--listen",
                f"127.0.0.1:{base}",
                "--data-dir",
                str(self.data_dir),
                # serve's default /metrics port is the Kafka port + 100, which another
                # test's block may hold: any free port instead, unless the test names one.
                *([] if "--http-port" in self.args else ["--http-port", "0"]),
                *self.args,
            ]
        )
        resolve(parsed, parsed.settings)  # the environment and defaults, as the CLI does
        configs = serve_configs(parsed)
        root = logging.getLogger()
        root.addHandler(self._capture)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        started = threading.Event()
        failure: list[BaseException] = []

        async def run() -> None:
            try:
                self._nodes = [Node(c) for c in configs]
                for node in self._nodes:
                    await node.start()
                self.port = self._nodes[0].port
            except BaseException as exc:
                failure.append(exc)
            finally:
                started.set()

        def thread_main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            loop.create_task(run())
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=thread_main, name="zonegate-node", daemon=True)
        self._thread.start()
        if not started.wait(timeout) or failure:
            self.stop()
            raise RuntimeError(f"in-process node did not start: {failure}\n{self.log_text()}")
        return self

    def call(self, coro: Any, timeout: float = 60) -> Any:
        """Runs a coroutine on the node's loop and returns its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopped

    def log_text(self) -> str:
        return self._capture.buffer.getvalue()

    def stop(self, timeout: float = 30) -> int:
        if self._stopped or self._loop is None:
            return 0
        self._stopped = True
        loop = self._loop

        async def stop_all() -> None:
            await asyncio.gather(*(n.stop() for n in self._nodes), return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout)
            logging.getLogger().removeHandler(self._capture)
        return 0


def start_inprocess_node(data_dir: Path, args: Sequence[str] = ()) -> InProcessNode:
    data_dir.mkdir(parents=True, exist_ok=True)
    return InProcessNode(data_dir, args).start()
