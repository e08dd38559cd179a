"""The node process's workers (docs/cores.md): started with the node's listening
sockets, started again when one exits unasked, drained with the node, and read for
the node's one /metrics.

A worker is `python -m zonegate.broker.worker`: it reads its `WorkerBoot` from its
standard input (a length and a pickle), inherits the listening sockets' descriptors,
and writes one line, `worker ready http=PORT`, once it serves. Its standard input
stays open for its whole life: when it closes (the node process died, even by
`kill -9`), the worker drains and exits rather than serve without its node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pickle
import signal
import struct
import sys
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from zonegate.broker.config import NodeConfig
from zonegate.broker.metrics_merge import gauge_total, merge
from zonegate.broker.startup import StartupError

log = logging.getLogger(__name__)
_READY = "worker ready http="
_START_TIMEOUT_S = 60.0
_SCRAPE_TIMEOUT_S = 5.0


_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "[::1]"}


def loopback(host: str) -> str:
    """Where a worker on this machine dials a listener bound on `host`."""
    if host in _WILDCARDS:
        return _WILDCARDS[host]
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class WorkerBoot:
    """What a worker is told at start."""

    config: NodeConfig
    index: int  # 1..N-1: the node process is 0
    fds: tuple[int, ...]  # the listening sockets, in the order of config.kafka_listeners
    rpc_target: str  # the node process's leader RPC, host:port
    log_level: str

    def encode(self) -> bytes:
        data = pickle.dumps(self)
        return struct.pack(">Q", len(data)) + data


@dataclass
class _Worker:
    index: int
    proc: asyncio.subprocess.Process | None = None
    http_port: int = 0
    last_metrics: str = ""  # as last read: kept when the worker exits (metrics_merge.py)
    watch: asyncio.Task[None] | None = field(default=None, repr=False)


class WorkerPool:
    def __init__(
        self,
        config: NodeConfig,
        fds: tuple[int, ...],
        rpc_target: str,
        log_level: str,
        *,
        restart_delay_s: float = 0.5,
    ) -> None:
        self._config = config
        self._fds = fds
        self._rpc_target = rpc_target
        self._log_level = log_level
        self._restart_delay_s = restart_delay_s
        self._workers = [_Worker(i) for i in range(1, config.workers)]
        self._stopping = False
        self.restarts = 0
        self._retired: list[str] = []  # exited workers' last metrics

    @property
    def pids(self) -> list[int]:
        """The running workers' process ids."""
        return [w.proc.pid for w in self._workers if w.proc and w.proc.returncode is None]

    async def start(self) -> None:
        for w in self._workers:
            await self._spawn(w)
            w.watch = asyncio.get_running_loop().create_task(self._watch(w))

    async def _spawn(self, w: _Worker) -> None:
        boot = WorkerBoot(self._config, w.index, self._fds, self._rpc_target, self._log_level)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "zonegate.broker.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            pass_fds=self._fds,
        )
        w.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(boot.encode())
        await proc.stdin.drain()  # stdin stays open: the worker's tie to this process
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), _START_TIMEOUT_S)
        except TimeoutError:
            line = b""
        text = line.decode(errors="replace").strip()
        if not text.startswith(_READY):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise StartupError(
                f"node {self._config.node_id}: worker {w.index} did not start "
                f"(exit {proc.returncode}; its log is above)"
            )
        w.http_port = int(text.removeprefix(_READY))
        log.info("node %d: worker %d serving (pid %d)", self._config.node_id, w.index, proc.pid)

    async def _watch(self, w: _Worker) -> None:
        """Starts `w` again whenever it exits while the node is not stopping."""
        while True:
            assert w.proc is not None
            code = await w.proc.wait()
            if self._stopping:
                return
            self.restarts += 1
            if w.last_metrics:
                self._retired.append(w.last_metrics)
                w.last_metrics = ""
            log.warning(
                "node %d: worker %d (pid %d) exited (%s); starting it again",
                self._config.node_id,
                w.index,
                w.proc.pid,
                code,
            )
            await asyncio.sleep(self._restart_delay_s)
            if self._stopping:
                return
            try:
                await self._spawn(w)
            except Exception as exc:  # tried again after the delay (w.proc has exited)
                log.error("node %d: worker %d: %s", self._config.node_id, w.index, exc)

    async def stop(self, timeout_s: float | None = None) -> None:
        """Tells every worker to drain (SIGTERM) and waits for them; kills those still
        running after the drain deadline and a few seconds more."""
        self._stopping = True
        timeout = (self._config.drain_timeout_s if timeout_s is None else timeout_s) + 5.0
        running = [w.proc for w in self._workers if w.proc and w.proc.returncode is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in running)), timeout)
        except TimeoutError:
            for proc in running:
                if proc.returncode is None:
                    log.warning("worker pid %d did not drain in time: killed", proc.pid)
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()
        for w in self._workers:
            if w.watch is not None:
                w.watch.cancel()
            if w.proc is not None and w.proc.stdin is not None:
                w.proc.stdin.close()

    async def _scrape(self, port: int) -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: worker\r\n\r\n")
            await writer.drain()
            answer = await reader.read()
        finally:
            writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise ConnectionError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
        return body.decode()

    async def combine(self, own: bytes) -> bytes:
        """The node's /metrics: this process's and every running worker's, added up
        (broker/metrics_merge.py), with the workers' own figures."""
        alive = [w for w in self._workers if w.proc and w.proc.returncode is None]
        texts = await asyncio.gather(
            *(asyncio.wait_for(self._scrape(w.http_port), _SCRAPE_TIMEOUT_S) for w in alive),
            return_exceptions=True,
        )
        node = str(self._config.node_id)
        own_text = own.decode()
        per_process = GaugeMetricFamily(
            "zonegate_process_connections",
            "Open Kafka client connections per process of the node (0: the node process)",
            labels=["node", "process"],
        )
        per_process.add_metric([node, "0"], gauge_total(own_text, "zonegate_connections"))
        workers: list[str] = []
        unread: list[str] = []  # their counters as last read, so the node's never drop
        for w, text in zip(alive, texts, strict=True):
            if isinstance(text, BaseException):
                log.warning("worker %d's metrics unread: %s", w.index, text)
                unread += [w.last_metrics] if w.last_metrics else []
                continue
            workers.append(text)
            w.last_metrics = text
            per_process.add_metric([node, str(w.index)], gauge_total(text, "zonegate_connections"))
        serving = GaugeMetricFamily(
            "zonegate_workers",
            "Processes serving the node's Kafka listeners (the node process and its workers)",
            labels=["node"],
        )
        serving.add_metric([node], 1 + len(workers))
        restarts = CounterMetricFamily(
            "zonegate_worker_restarts",
            "Workers started again after they exited unasked",
            labels=["node"],
        )
        restarts.add_metric([node], self.restarts)
        extra = [per_process, serving, restarts]
        return merge(own_text, workers, extra, [*self._retired, *unread])
