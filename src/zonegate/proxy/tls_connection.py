"""A TLS listener's Kafka connection: `KafkaConnection` (proxy/connection.py) reading its
ciphertext into one shared buffer, and pacing its reads after produce requests."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from zonegate.proxy.connection import KafkaConnection

# What one read from a TLS connection's socket may take: the event loop's own read size
# (uvloop's and asyncio's are 256 KiB).
TLS_READ_BYTES = 256 * 1024
# After a produce request is read, a TLS connection reads nothing more until it is
# answered or this long has passed (TlsKafkaConnection).
TLS_PRODUCE_PACE_S = 0.005
_PRODUCE = 0
_read_local = threading.local()


class TlsKafkaConnection(KafkaConnection, asyncio.BufferedProtocol):
    """A TLS listener's connection: the ciphertext is read straight into a buffer the
    thread's TLS connections share and goes from there into the session's memory BIO,
    instead of into bytes of its own per read (an allocation and a copy more than
    needed: the BIO takes its own copy anyway). One buffer serves every connection: the
    event loop fills it and calls `buffer_updated` before any other read, which
    consumes it at once.

    After a produce request, the connection reads nothing more until the request is
    answered or TLS_PRODUCE_PACE_S has passed, as a Kafka broker reads a connection's
    next request only once it answered the last (its muted channel), but without
    giving up pipelining where answers take long (a WAL on S3). Some clients send a
    TLS record per message (librdkafka: one per 1 KiB payload it does not copy); read
    as it comes, each record crosses the loopback or network stack on its own, and
    both sides pay per record. Left in the socket for a few milliseconds, the
    client's records queue up and go out, and are read, in large pieces: with
    librdkafka, 300k x 1 KiB records over SASL_SSL, the client's CPU fell from
    10-12 to 6-9 s/GiB and the node's event loop from 5.2-6.2 to 3.3-5.2
    (docs/benchmarks.md). Plaintext connections read as before: there librdkafka
    sends a request in a few large writes."""

    _pace_timer: asyncio.TimerHandle | None = None
    _paced_for: asyncio.Task[Any] | None = None  # the request the current pause waits on

    def _enqueued(self, api_key: int, task: asyncio.Task[Any]) -> None:
        if api_key != _PRODUCE or "pacing" in self._paused_for:
            return
        self._pause_reading("pacing")
        self._paced_for = task
        self._pace_timer = asyncio.get_running_loop().call_later(
            TLS_PRODUCE_PACE_S, self._paced, task
        )
        task.add_done_callback(self._paced)

    def _paced(self, task: asyncio.Task[Any]) -> None:
        """The pause for `task` ends (answered, or its time is up); a later pause, for
        another request, is not this one's to end."""
        if task is not self._paced_for:
            return
        self._paced_for = None
        if self._pace_timer is not None:
            self._pace_timer.cancel()
            self._pace_timer = None
        if not self._closed:
            self._resume_reading("pacing")

    def get_buffer(self, sizehint: int) -> memoryview:
        view: memoryview | None = getattr(_read_local, "view", None)
        if view is None:
            view = _read_local.view = memoryview(bytearray(TLS_READ_BYTES))
        return view

    def buffer_updated(self, nbytes: int) -> None:
        view: memoryview = _read_local.view
        self.data_received(view[:nbytes])
