"""One Kafka connection: moves bytes between its socket and the codec, nothing more.

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
from typing import TYPE_CHECKING, Any, cast

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
from zonegate.proxy.gate import RAW_TOKEN
from zonegate.proxy.registry import HandlerRegistry
from zonegate.proxy.secured import SecuredConnection
from zonegate.proxy.throttling import BusyTime, timed, with_throttle
from zonegate.proxy.tls import TlsError, TlsSession
from zonegate.proxy.tls_frames import TlsFrameReader
from zonegate.runtime.principal import acting_for
from zonegate.services.api import ANONYMOUS

if TYPE_CHECKING:
    from kio.static.protocol import ResponsePayload

    from zonegate.proxy.auth import AuthStep, ConnectionAuth
    from zonegate.proxy.server import KafkaServer, ListenerConfig
    from zonegate.services.api import Services

log = logging.getLogger(__name__)
_connection_ids = itertools.count(1)


class KafkaConnection(SecuredConnection, asyncio.BaseProtocol):
    """A plaintext listener's connection: the event loop hands it the bytes it read
    (`data_received`); TlsKafkaConnection (proxy/tls_connection.py) reads into a buffer
    of its own."""

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
        # TLS listeners: a TlsFrameReader once the connection opens, framing the
        # session's records as they are decrypted.
        self._decoder: FrameDecoder | TlsFrameReader = FrameDecoder(config.max_request_bytes)
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
        # quota's throttle time, KIP-219), "memory" (the node's queued request bytes),
        # "pacing" (TLS, after a produce request: proxy/tls_connection.py).
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
        # Its authentication (proxy/auth), once TLS (if any) gave the client certificate;
        # None on a listener without a gate (tests' bare servers): everyone is anonymous.
        self.auth: ConnectionAuth | None = None

    # -- asyncio.Protocol -------------------------------------------------
    def eof_received(self) -> bool | None:
        # The client closed its side. A Kafka broker closes the connection when its read
        # ends, and so does the transport when this answers None (asyncio.Protocol's own
        # default, which BaseProtocol lacks: without it each half-close was logged as a
        # fatal error of the protocol).
        return None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses but behave as one.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.client = ClientInfo(str(peer[0]), int(peer[1]), self.client.connection_id)
        refused = self._server.over_connection_limits(self.client.host)
        if refused is not None:
            self._closed = True
            self._server.count_refused()
            log.debug("refusing connection from %s: %s", self.client.host, refused)
            transport.close()
            return
        self._server.connections.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                self._config.size_buffers(sock)
            except OSError as exc:  # the peer already gone: nothing to size
                log.debug("sizing the buffers of %s's socket: %s", self.client.host, exc)
        loop = asyncio.get_running_loop()
        if self._server.contexts is not None:
            self._tls = TlsSession(self._server.contexts.current())
            self._decoder = TlsFrameReader(self._tls, self._config.max_request_bytes)
            self._handshake_timer = loop.call_later(
                self._config.handshake_timeout_s, self._handshake_timed_out
            )
        else:
            self._start_auth(None)
        self._writer = loop.create_task(self._write_loop())

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

    def data_received(self, data: bytes | memoryview) -> None:
        """Plaintext: the loop's own bytes, which the decoder keeps. TLS: a view of the
        read buffer (TlsKafkaConnection), which the session's BIO copies at once."""
        if self._closed:
            return
        if self._tls is None:
            assert isinstance(data, bytes)
            if self._first_bytes and data:
                self._first_bytes = False
                if data[:2] == b"\x16\x03":
                    self.abort(
                        f"a TLS handshake on listener {self._config.name}, which is plaintext"
                    )
                    return
            self._decoder.receive_data(data)
        elif self._tls.handshake_done:
            self._tls.feed(data)
        elif not self._tls_handshake(data):
            return  # not done yet, or failed: the records after it wait in the session
        self._read_frames()

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
            if self._tls is not None and not self._tls_flush():
                return
            self._dispatch_held()
        except PeerProtocolError as exc:
            self.abort(exc.reason)
        except TlsError as exc:
            self.abort(f"{exc.reason} (listener {self._config.name})")

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
            # During SASL authentication one request at a time too (Kafka mutes the
            # channel): each answer moves the authenticator on before the next is read.
            one_at_a_time = self._serial or (self.auth is not None and not self.auth.authenticated)
            if "muted" in self._paused_for or (one_at_a_time and self._pending):
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
        auth = self.auth
        if auth is not None and auth.raw_mode:  # after SaslHandshake v0: a raw SASL token
            self._enqueue(
                0, RAW_TOKEN, self._raw_token(auth, frame), None, None, None, len(frame) + 4
            )
            return
        header, body_offset = peek_header(frame)
        if auth is not None:
            decision = auth.admits(header.api_key, header.api_version)
            if not decision.serve:
                self._refuse(decision.reason, decision.delay_ms, frame, decision.error_code)
                return
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
            principal=auth.principal if auth is not None else ANONYMOUS,
            auth=auth,
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
        # The task copies the context here: calls it passes to other nodes carry the
        # principal, and changes it causes are logged with it (runtime/principal.py).
        with acting_for(ctx.principal):
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
        self._enqueued(api_key, task)

    def _enqueued(self, api_key: int, task: asyncio.Task[Any]) -> None:
        """A request was just queued for its answer (TLS connections pace their reads)."""

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
            if api_key == RAW_TOKEN:
                if not await self._answer_raw_token(cast("AuthStep", response)):
                    return
                continue
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
                    account_request(ctx, body, len(frame), response)
            except Exception:
                self._internal_error(api_key, ctx, "answer")
                return
            if ctx is not None:
                self._server.metrics.answered(api_key, ctx.received_at, response)
            failed = ctx is not None and self._auth_failed(ctx, api_key)
            if failed:  # connection.failed.authentication.delay.ms, then the answer
                assert ctx is not None and ctx.auth is not None
                await asyncio.sleep(ctx.auth.failure_delay_ms / 1000)
                if self._closed:
                    return
            if response is not None:
                self._server.metrics_response_bytes(len(frame))
                self._write(frame)
            if failed:
                self._close_failed_authentication()
                return
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

    def abort(self, reason: str, level: int = logging.WARNING, linger_s: float = 0.0) -> None:
        """Closes the connection: nothing more is read or answered. `linger_s`: the
        answer just written is the client's last, and the socket closes when the client
        closes it or after this long, whichever comes first (see secured.ANSWER_LINGER_S)."""
        if self._closed:
            return
        log.log(
            level,
            "closing connection %d from %s:%d (%s): %s",
            self.client.connection_id,
            self.client.host,
            self.client.port,
            self.auth.principal if self.auth is not None else ANONYMOUS,
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
        if self._transport is None:
            return
        if linger_s > 0:
            asyncio.get_running_loop().call_later(linger_s, self._transport.close)
        else:
            self._transport.close()

    def close_transport(self) -> None:
        """Closes the socket now, also one lingering after its last answer."""
        if self._transport is not None:
            self._transport.close()

    async def drain(self) -> None:
        """Waits until every request already read is answered."""
        while self._pending and not self._closed:
            await asyncio.wait([self._pending[-1][2]])
            await asyncio.sleep(0)  # let the write loop send the answer
