"""Kafka's throttling at the listener (KIP-219): the time a request kept the node busy
(request_percentage), the throttle time written into the answer, and how long the
connection is muted after it.

A handler's quotas (producer_byte_rate, consumer_byte_rate, controller
mutations) set `ctx.throttle`; the listener adds the request quota, writes the
largest into the answer's `throttle_time_ms` and stops reading the connection
for that long after sending it, so a client that ignores the throttle time
gains nothing. Well-behaved clients hold back by themselves.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from zonegate.proxy.codec import EncodedBody

_I32 = struct.Struct(">i")


class BusyTime:
    """Wraps a handler's coroutine and sums the time its steps ran on the event loop:
    the equivalent of the time a Kafka request spends on request-handler threads,
    without its waits (a WAL seal, a long poll). `timer` reads seconds (tests pass a
    manual clock's)."""

    __slots__ = ("_coro", "_timer", "seconds")

    def __init__(
        self, answer: Awaitable[Any], timer: Callable[[], float] = time.perf_counter
    ) -> None:
        self._coro = answer
        self._timer = timer
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro.__await__()
        timer = self._timer
        send: Any = None
        error: BaseException | None = None
        while True:
            start = timer()
            try:
                yielded = coro.throw(error) if error is not None else coro.send(send)
            except StopIteration as done:
                self.seconds += timer() - start
                return done.value
            except BaseException:
                self.seconds += timer() - start
                raise
            self.seconds += timer() - start
            try:
                send, error = (yield yielded), None
            except BaseException as exc:  # cancellation: passed on to the handler
                send, error = None, exc


async def timed(busy: BusyTime) -> Any:
    return await busy


def with_throttle(response: Any, ms: int) -> Any:
    """The answer with `throttle_time_ms` set to `ms` where the answer has one."""
    if isinstance(response, EncodedBody):
        if response.throttle_at < 0:
            return response
        data = bytearray(response.data)
        _I32.pack_into(data, response.throttle_at, ms)
        return dataclasses.replace(response, data=bytes(data))
    if hasattr(response, "throttle_time"):  # kio's answers are frozen dataclasses
        answer: Any = response
        return dataclasses.replace(answer, throttle_time=datetime.timedelta(milliseconds=ms))
    return response
