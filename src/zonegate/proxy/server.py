"""The Kafka listener: moves bytes between sockets and the codec, nothing more.

Requests on one connection are handled concurrently (producers pipeline up to
`max.in.flight` requests and each waits for a WAL seal), but answered strictly
in arrival order, as Kafka requires. Reading pauses when a connection has too
many requests in flight or its writes back up.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from zonegate.proxy.accounting import account_request
from zonegate.proxy.codec import (
    API_VERSIONS_KEY,
    FrameDecoder,
    decode_request,
    encode_response,
    peek_header,
)
from zonegate.proxy.context import ClientInfo, RequestContext
from zonegate.proxy.errors import PeerProtocolError
from zonegate.proxy.faults import FaultInjector, FrameCapture
from zonegate.proxy.memory import RequestMemory
from zonegate.proxy.metrics import RequestMetrics
from zonegate.proxy.registry import HandlerRegistry
from zonegate.proxy.throttling import BusyTime, timed, with_throttle
from zonegate.proxy.tls import ServerContexts, TlsError, TlsSession
from zonegate.services.api import ANONYMOUS

if TYPE_CHECKING:
    from kio.static.protocol import ResponsePayload

    from zonegate.services.api import Services

log = logging.getLogger(__name__)
_connection_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    host: str
    port: int
    max_request_bytes: int = 104_857_600  # socket.request.max.bytes
    max_inflight_per_connection: int = 64
    name: str = "PLAINTEXT"  # the listener's name, as Kafka names listeners
    queued_max_request_bytes: int = -1  # queued.max.request.bytes; -1: no bound
    max_connections: int = 2_147_483_647  # max.connections
    max_connections_per_ip: int = 2_147_483_647  # max.connections.per.ip
    handshake_timeout_s: float = 10.0  # a TLS handshake not done by then is closed


class KafkaConnection(asyncio.Protocol):
    def __init__(
        self,
        services: Services,
        registry: HandlerRegistry,
        config: ListenerConfig,
        server: KafkaServer,
    ) -> None:
        self._services = services
        self._registry = registry
        self._config = config
        self._server = server
        self._decoder = FrameDecoder(config.max_request_bytes)
        # (correlation id, api key, handler task, context, request, its busy time, its
        # bytes) in arrival order
        self._pending: collections.deque[
            tuple[int, int, asyncio.Task[Any], RequestContext | None, Any, BusyTime | None, int]
        ] = collections.deque()
        # Bytes reserved in the node's request memory: requests read, held or handled
        # and not yet answered, and the one being read (proxy/memory.py).
        self._reserved = 0
        self._frame_reserved = False
        self._wakeup = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._transport: asyncio.Transport | None = None
        self._writer: asyncio.Task[None] | None = None
        # Why reading is paused: "in-flight" (too many requests unanswered), "muted" (a
        # quota's throttle time, KIP-219), "memory" (the node's queued request bytes).
        self._paused_for: set[str] = set()
        self._mute_timer: asyncio.TimerHandle | None = None
        self._held: collections.deque[bytes] = collections.deque()  # read, not dispatched
        self._serial = False  # its client is under a quota: one request at a time
        self._closed = False
        self.client = ClientInfo("?", 0, next(_connection_ids))
        # TLS listeners: the connection's TLS (proxy/tls.py) until its handshake is done,
        # then the client certificate's subject, if it sent one.
        self._tls: TlsSession | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None
        self._first_bytes = True
        self.peer_dn: str | None = None

    # -- asyncio.Protocol -------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses but behave as one.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.client = ClientInfo(str(peer[0]), int(peer[1]), self.client.connection_id)
        refused = self._server.over_connection_limits(self.client.host)
        if refused is not None:
            self._closed = True
            self._server.connections_refused += 1
            log.debug("refusing connection from %s: %s", self.client.host, refused)
            transport.close()
            return
        self._server.connections.add(self)
        loop = asyncio.get_running_loop()
        if self._server.contexts is not None:
            self._tls = TlsSession(self._server.contexts.current())
            self._handshake_timer = loop.call_later(
                self._config.handshake_timeout_s, self._handshake_timed_out
            )
        self._writer = loop.create_task(self._write_loop())

    def _handshake_timed_out(self) -> None:
        self.abort(
            f"TLS handshake not finished within {self._config.handshake_timeout_s:g}s "
            f"on listener {self._config.name}"
        )

    def _write(self, data: bytes) -> None:
        assert self._transport is not None
        if self._tls is not None:
            data = self._tls.send(data)
        self._transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._server.connections.discard(self)
        self._give_back_memory()
        # Nobody will read the answers: stop the work (a long-poll Fetch may wait up
        # to its max_wait_ms, 24 days at most, holding its request).
        for entry in self._pending:
            entry[2].cancel()
        self._pending.clear()
        self._held.clear()
        self._wakeup.set()
        self._can_write.set()
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()

    def pause_writing(self) -> None:
        # Backpressure: a client that does not read its answers is not read either.
        self._can_write.clear()
        self._pause_reading("writes")

    def resume_writing(self) -> None:
        self._can_write.set()
        self._resume_reading("writes")

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        if self._first_bytes and data:
            self._first_bytes = False
            if self._tls is None and data[:2] == b"\x16\x03":
                self.abort(f"a TLS handshake on listener {self._config.name}, which is plaintext")
                return
        if self._tls is not None:
            data = self._tls_received(data)
            if not data:
                return
        self._decoder.receive_data(data)
        self._read_frames()

    def _tls_received(self, data: bytes) -> bytes:
        """The application bytes in `data`; sends what TLS answers (handshake records)."""
        assert self._tls is not None and self._transport is not None
        was_done = self._tls.handshake_done
        try:
            app, out = self._tls.receive(data)
        except TlsError as exc:
            self.abort(f"{exc.reason} (listener {self._config.name})")
            return b""
        if out:
            self._transport.write(out)
        if self._tls.handshake_done and not was_done:
            if self._handshake_timer is not None:
                self._handshake_timer.cancel()
                self._handshake_timer = None
            self.peer_dn = self._tls.peer_dn()
        return app

    def _read_frames(self) -> None:
        memory = self._server.memory
        try:
            while (size := self._decoder.next_size()) is not None:
                if not self._frame_reserved:
                    if not memory.try_reserve(size + 4):
                        # queued.max.request.bytes: this request waits, unread, until
                        # answers free memory.
                        self._pause_reading("memory")
                        memory.wait(self.client.connection_id, self._memory_freed)
                        break
                    self._frame_reserved = True
                    self._reserved += size + 4
                frame = self._decoder.next_frame()
                if frame is None:
                    break
                self._frame_reserved = False
                self._server.metrics_request_bytes(len(frame) + 4)
                if self._server.capture.active:
                    self._server.capture.record(frame)
                self._held.append(frame)
            self._dispatch_held()
        except PeerProtocolError as exc:
            self.abort(exc.reason)

    def _memory_freed(self) -> None:
        if self._closed:
            return
        self._resume_reading("memory")
        self._read_frames()

    def _give_back_memory(self) -> None:
        self._server.memory.forget(self.client.connection_id)
        if self._reserved:
            reserved, self._reserved = self._reserved, 0
            self._server.memory.release(reserved)

    def _dispatch_held(self) -> None:
        """Dispatches the frames read, unless the connection is muted (a quota's throttle
        time) or serial (its client is under a quota: as Kafka's broker, which reads a
        connection's next request only once the previous one is answered, so a
        throttled client cannot have more requests handled meanwhile). Reading pauses
        while frames wait."""
        while self._held and not self._closed:
            if "muted" in self._paused_for or (self._serial and self._pending):
                self._pause_reading("held")
                return
            try:
                self._dispatch(self._held.popleft())
            except PeerProtocolError as exc:  # also when called from the write loop
                self.abort(exc.reason)
                return
        self._resume_reading("held")

    # -- dispatch ---------------------------------------------------------
    def _dispatch(self, frame: bytes) -> None:
        header, body_offset = peek_header(frame)
        handler = self._registry.handler_for(header.api_key, header.api_version)
        if handler is None:
            if header.api_key == API_VERSIONS_KEY:
                # KIP-511: answer an unknown ApiVersions version with v0 and the error,
                # so the client can retry with a version we know.
                from zonegate.proxy.handlers.api_versions import unsupported_version_answer

                self._enqueue(
                    header.correlation_id,
                    header.api_key,
                    unsupported_version_answer(),
                    None,
                    None,
                    None,
                    len(frame) + 4,
                )
                return
            known = self._registry.lookup(header.api_key) is not None
            what = "unsupported version" if known else "unknown API key"
            self.abort(f"{what}: api_key={header.api_key} api_version={header.api_version}")
            return
        request = decode_request(frame, header, body_offset)
        ctx = RequestContext(
            services=self._services,
            principal=ANONYMOUS,
            listener=self._config.name,
            client=self.client,
            client_zone=self._services.cluster.client_zone(header.client_id, self.client.host),
            api_key=header.api_key,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
            request_bytes=len(frame) + 4,
            received_at=time.perf_counter(),
        )
        self._serial = self._services.quotas.applies(ctx.principal, header.client_id or "")
        busy = BusyTime(handler(ctx, request.body))
        self._enqueue(
            header.correlation_id,
            header.api_key,
            timed(busy),
            ctx,
            request.body,
            busy,
            len(frame) + 4,
        )

    def _enqueue(
        self,
        correlation_id: int,
        api_key: int,
        answer: Any,
        ctx: RequestContext | None,
        body: Any,
        busy: BusyTime | None,
        nbytes: int,
    ) -> None:
        loop = asyncio.get_running_loop()
        task: asyncio.Task[Any] = loop.create_task(answer)
        self._pending.append((correlation_id, api_key, task, ctx, body, busy, nbytes))
        self._wakeup.set()
        if len(self._pending) >= self._config.max_inflight_per_connection:
            self._pause_reading("in-flight")

    def _pause_reading(self, reason: str) -> None:
        if not self._paused_for and self._transport is not None and not self._closed:
            self._transport.pause_reading()
        self._paused_for.add(reason)

    def _resume_reading(self, reason: str) -> None:
        if reason not in self._paused_for:
            return
        self._paused_for.discard(reason)
        if not self._paused_for and self._transport is not None and not self._closed:
            self._transport.resume_reading()

    def _mute(self, ms: int) -> None:
        """Reads nothing more from this client for `ms` (KIP-219's muted channel)."""
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self._pause_reading("muted")
        loop = asyncio.get_running_loop()
        self._mute_timer = loop.call_later(ms / 1000.0, self._unmute)

    def _unmute(self) -> None:
        self._mute_timer = None
        self._paused_for.discard("muted")
        self._dispatch_held()
        if not self._paused_for and self._transport is not None and not self._closed:
            self._transport.resume_reading()

    async def _write_loop(self) -> None:
        while True:
            while not self._pending:
                if self._closed:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            correlation_id, api_key, task, ctx, body, busy, nbytes = self._pending[0]
            try:
                response: ResponsePayload | None = await task
            except asyncio.CancelledError:
                if self._closed:
                    return
                raise
            except PeerProtocolError as exc:
                self.abort(exc.reason)  # the request was well-formed but not valid
                return
            except Exception:
                self._internal_error(api_key, ctx, "handler")
                return
            if self._closed:
                return  # aborted while the handler ran: `_pending` is cleared
            self._pending.popleft()
            self._reserved -= nbytes
            self._server.memory.release(nbytes)
            if ctx is not None:
                response = self._throttled(ctx, busy, response)
            if self._server.faults.take(api_key, "drop_response"):
                self.abort(f"test fault: dropping the answer to api_key={api_key}")
                return
            try:
                frame = (
                    b"" if response is None else encode_response(correlation_id, api_key, response)
                )
                if ctx is not None:
                    account_request(ctx, body, len(frame))
            except Exception:
                self._internal_error(api_key, ctx, "answer")
                return
            if ctx is not None:
                self._server.metrics.answered(api_key, ctx.received_at, response)
            if response is not None:
                self._server.metrics_response_bytes(len(frame))
                self._write(frame)
            if ctx is not None and ctx.throttle.ms > 0:
                self._mute(ctx.throttle.ms)
            if response is not None and not self._can_write.is_set():
                await self._can_write.wait()
            if len(self._pending) < self._config.max_inflight_per_connection // 2:
                self._resume_reading("in-flight")
            if self._held:
                self._dispatch_held()

    def _throttled(self, ctx: RequestContext, busy: BusyTime | None, response: Any) -> Any:
        """Adds the request quota's throttle time to the handler's, and writes the
        largest into the answer."""
        if busy is not None:
            ctx.throttle.at_least(
                self._services.quotas.record_request_time(
                    ctx.principal, ctx.client_id or "", busy.seconds
                )
            )
        if ctx.throttle.ms > 0 and response is not None:
            return with_throttle(response, ctx.throttle.ms)
        return response

    def _internal_error(self, api_key: int, ctx: RequestContext | None, stage: str) -> None:
        """Our own fault (a handler raised, or its answer would not encode): logged at
        ERROR with the traceback, and the connection closed, as Kafka closes it after an
        unexpected error, so the client retries on a new one."""
        version = ctx.api_version if ctx is not None else -1
        log.exception(
            "connection %d: %s for api_key=%d v%d failed; closing the connection",
            self.client.connection_id,
            stage,
            api_key,
            version,
        )
        self.abort(f"internal error in the {stage} for api_key={api_key} v{version}")

    def abort(self, reason: str) -> None:
        if self._closed:
            return
        log.warning(
            "closing connection %d from %s:%d: %s",
            self.client.connection_id,
            self.client.host,
            self.client.port,
            reason,
        )
        self._closed = True
        for entry in self._pending:
            entry[2].cancel()
        self._pending.clear()
        self._held.clear()
        self._give_back_memory()
        self._wakeup.set()
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        if self._transport is not None:
            self._transport.close()

    async def drain(self) -> None:
        """Waits until every request already read is answered."""
        while self._pending and not self._closed:
            await asyncio.wait([self._pending[-1][2]])
            await asyncio.sleep(0)  # let the write loop send the answer


class KafkaServer:
    def __init__(
        self,
        services: Services,
        registry: HandlerRegistry,
        config: ListenerConfig,
        contexts: ServerContexts | None = None,
    ) -> None:
        self._services = services
        self.contexts = contexts  # TLS listeners: the current certificate's context
        self._registry = registry
        self._config = config
        self._server: asyncio.Server | None = None
        self.connections: set[KafkaConnection] = set()
        self.faults = FaultInjector()
        self.capture = FrameCapture()
        self.bytes_in = 0
        self.bytes_out = 0
        self.metrics = RequestMetrics()
        self.memory = RequestMemory(config.queued_max_request_bytes)
        self.connections_refused = 0

    def over_connection_limits(self, host: str) -> str | None:
        """Why a new connection from `host` is one too many, or None."""
        c = self._config
        if len(self.connections) >= c.max_connections:
            return f"max.connections ({c.max_connections}) reached"
        if c.max_connections_per_ip < 2_147_483_647:
            same = sum(1 for conn in self.connections if conn.client.host == host)
            if same >= c.max_connections_per_ip:
                return f"max.connections.per.ip ({c.max_connections_per_ip}) reached for {host}"
        return None

    def metrics_request_bytes(self, n: int) -> None:
        self.bytes_in += n

    def metrics_response_bytes(self, n: int) -> None:
        self.bytes_out += n

    @property
    def name(self) -> str:
        return self._config.name

    @property
    def port(self) -> int:
        assert self._server is not None
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self._services, self._registry, self._config, self),
            self._config.host,
            self._config.port,
            reuse_address=True,
            backlog=1024,
        )

    async def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def drain(self, timeout_s: float) -> None:
        """Stops reading, answers what was read (within the deadline), then closes."""
        for conn in list(self.connections):
            conn._pause_reading("draining")
        try:
            await asyncio.wait_for(
                asyncio.gather(*(c.drain() for c in list(self.connections))), timeout_s
            )
        except TimeoutError:
            log.warning("drain deadline of %.1fs passed with requests unanswered", timeout_s)
        for conn in list(self.connections):
            conn.abort("node shutting down")


__all__ = ["ErrorCode", "KafkaServer", "ListenerConfig"]
