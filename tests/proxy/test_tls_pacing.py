"""A TLS connection reads nothing more after a produce request until it is answered or
TLS_PRODUCE_PACE_S has passed (proxy/tls_connection.py): its client's records queue in
the socket meanwhile and are read in large pieces. Other requests are read on at once."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from zonegate.proxy import tls_connection
from zonegate.proxy.server import ListenerConfig
from zonegate.proxy.tls_connection import TlsKafkaConnection

PRODUCE, FETCH = 0, 1


class Transport:
    """What the connection asks of its transport: whether it is reading."""

    def __init__(self) -> None:
        self.reading = True
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.reading = False
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.reading = True
        self.calls.append("resume")


def _connection() -> tuple[TlsKafkaConnection, Transport]:
    conn = TlsKafkaConnection(
        cast(Any, None), cast(Any, None), ListenerConfig("127.0.0.1", 0), cast(Any, None)
    )
    transport = Transport()
    conn._transport = cast(Any, transport)
    return conn, transport


async def _request(conn: TlsKafkaConnection, api_key: int, answer: asyncio.Future[Any]) -> None:
    async def handler() -> Any:
        return await answer

    conn._enqueue(7, api_key, handler(), None, None, None, 100)


def test_after_a_produce_request_reading_waits_for_its_answer() -> None:
    async def run() -> None:
        conn, transport = _connection()
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await _request(conn, PRODUCE, answer)
        assert not transport.reading
        await asyncio.sleep(0)
        assert not transport.reading  # the handler waits: so does reading
        answer.set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)  # the handler ends, then its done callback runs
        assert transport.reading
        assert conn._pace_timer is None
        assert transport.calls == ["pause", "resume"]

    asyncio.run(run())


def test_an_unanswered_produce_request_holds_reading_only_for_the_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        conn, transport = _connection()
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        await _request(conn, PRODUCE, answer)
        assert conn._pace_timer is not None
        assert conn._pace_timer.when() - loop.time() == pytest.approx(0.005, abs=0.004)
        assert not transport.reading

    asyncio.run(run())

    # The timer itself, with the pace made as short as the loop's clock allows.
    monkeypatch.setattr(tls_connection, "TLS_PRODUCE_PACE_S", 1e-9)

    async def timed_out() -> None:
        conn, transport = _connection()
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await _request(conn, PRODUCE, answer)
        assert not transport.reading
        for _ in range(3):
            await asyncio.sleep(0)
        assert transport.reading  # still unanswered, read on after the pace
        answer.cancel()

    asyncio.run(timed_out())


def test_an_earlier_answer_does_not_end_a_later_requests_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tls_connection, "TLS_PRODUCE_PACE_S", 1e-9)

    async def run() -> None:
        conn, transport = _connection()
        loop = asyncio.get_running_loop()
        first: asyncio.Future[Any] = loop.create_future()
        await _request(conn, PRODUCE, first)
        for _ in range(3):
            await asyncio.sleep(0)
        assert transport.reading  # the first one's pace is up, unanswered
        monkeypatch.setattr(tls_connection, "TLS_PRODUCE_PACE_S", 60.0)
        second: asyncio.Future[Any] = loop.create_future()
        await _request(conn, PRODUCE, second)
        assert not transport.reading
        first.set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)
        assert not transport.reading  # the second one is still unanswered
        second.set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)
        assert transport.reading

    asyncio.run(run())


def test_other_requests_do_not_pause_reading() -> None:
    async def run() -> None:
        conn, transport = _connection()
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await _request(conn, FETCH, answer)
        assert transport.reading and transport.calls == []
        answer.cancel()

    asyncio.run(run())
