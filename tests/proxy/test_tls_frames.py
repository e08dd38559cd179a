"""proxy/tls_frames.py without sockets: Kafka frames read out of a server TlsSession
whatever the records' sizes and however the ciphertext is cut, the size checked before
the body is read, a close_notify after the last frame, and assembly buffers reused."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest
import trustme

from zonegate.proxy import tls_frames
from zonegate.proxy.errors import PeerProtocolError
from zonegate.proxy.tls import TlsError, TlsSession, TlsSettings, build_context
from zonegate.proxy.tls_frames import TlsFrameReader

pytestmark = pytest.mark.unit


def _session(tmp_path: Path) -> tuple[TlsSession, ssl.SSLObject, ssl.MemoryBIO]:
    """A server session after its handshake with a client SSLObject; the client's
    outgoing BIO holds what it writes next."""
    ca = trustme.CA()
    keystore = tmp_path / "server.pem"
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    server = TlsSession(build_context(TlsSettings(keystore=keystore)))
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    for _ in range(10):
        try:
            client.do_handshake()
            break
        except ssl.SSLWantReadError:
            incoming.write(server.handshake(outgoing.read()))
    incoming.write(server.handshake(outgoing.read()))  # the client's Finished
    assert server.handshake_done
    return server, client, outgoing


def _frames(reader: TlsFrameReader) -> list[bytes]:
    out = []
    while reader.next_size() is not None:
        frame = reader.next_frame()
        if frame is None:
            break
        out.append(frame)
    return out


def _framed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize("record_bytes", [3, 1034, 16384])
def test_frames_come_out_whole_from_any_records_and_cuts(tmp_path: Path, record_bytes: int) -> None:
    """Records of 3 bytes (a size prefix across records), of 1 KiB (librdkafka's
    record per message) and full ones; the ciphertext cut at uneven places, several
    frames in one receive, an empty frame."""
    server, client, outgoing = _session(tmp_path)
    sizes = (1, 3000, 0, 17) if record_bytes == 3 else (1, 300_000, 0, 5000, 1_100_000, 17)
    bodies = [os.urandom(n) for n in sizes]
    stream = b"".join(_framed(b) for b in bodies)
    for start in range(0, len(stream), record_bytes):
        client.write(stream[start : start + record_bytes])
    wire = outgoing.read()
    reader = TlsFrameReader(server, 2_000_000)
    got: list[bytes] = []
    pos = 0
    for cut in (5, 20_000, 1, 100_003, 16_405, 700_001) * 10:
        server.feed(wire[pos : pos + cut])
        pos += cut
        got += _frames(reader)
    server.feed(wire[pos:])
    got += _frames(reader)
    assert got == bodies


def test_a_size_over_the_limit_is_refused_before_the_body(tmp_path: Path) -> None:
    server, client, outgoing = _session(tmp_path)
    client.write((1000).to_bytes(4, "big") + b"x" * 10)
    reader = TlsFrameReader(server, 999)
    server.feed(outgoing.read())
    with pytest.raises(PeerProtocolError, match=r"frame size 1000 outside 0\.\.999"):
        reader.next_size()


def test_close_notify_after_the_last_frame(tmp_path: Path) -> None:
    server, client, outgoing = _session(tmp_path)
    client.write(_framed(b"last"))
    try:
        client.unwrap()
    except ssl.SSLWantReadError:
        pass
    reader = TlsFrameReader(server, 1000)
    server.feed(outgoing.read())
    assert _frames(reader) == [b"last"]
    assert server.peer_closed
    assert server.outgoing()  # our close_notify, answering theirs
    assert reader.next_frame() is None


def test_records_that_are_not_tls_fail(tmp_path: Path) -> None:
    server, _, _ = _session(tmp_path)
    reader = TlsFrameReader(server, 1000)
    server.feed(b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
    with pytest.raises(TlsError, match="TLS failed"):
        reader.next_size()


def test_assembly_buffers_are_reused_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tls_frames, "_pool_local", type(tls_frames._pool_local)())
    server, client, outgoing = _session(tmp_path)
    reader = TlsFrameReader(server, 20_000_000)
    made: list[int] = []
    real_bytearray = bytearray

    class Counting(bytearray):
        def __init__(self, n: int) -> None:
            made.append(n)
            super().__init__(n)

    monkeypatch.setattr(tls_frames, "bytearray", Counting, raising=False)
    for _ in range(5):
        client.write(_framed(b"y" * 700_000))
        server.feed(outgoing.read())
        assert _frames(reader) == [b"y" * 700_000]
    assert made == [1 << 20]  # one buffer, a power of two, for the five frames
    big = tls_frames.POOL_MAX_BYTES + 1
    client.write(_framed(b"z" * big))
    server.feed(outgoing.read())
    assert _frames(reader) == [b"z" * big]
    pool = tls_frames._pool_local.pool
    assert all(len(b) <= tls_frames.POOL_MAX_BYTES for b in pool)
    assert isinstance(pool[0], real_bytearray)
