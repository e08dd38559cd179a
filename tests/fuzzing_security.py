"""Malformed input for secured listeners: SASL frames and garbage TLS records.

Used by tests/e2e/test_fuzz.py and benchmarks/fuzz.py beside tests/fuzzing.py.

- `fuzz_sasl`: SaslHandshake (v0, v1) and SaslAuthenticate (v0-v2) frames, well-formed
  and mutated, with PLAIN-, SCRAM- and OAUTHBEARER-shaped tokens and garbage, plus raw
  (v0, unframed-header) tokens and other APIs' frames, each connection's batch sent
  either before authenticating or after a real PLAIN login (`login`), over TLS or not.
- `fuzz_tls`: bytes that are not TLS on a TLS port; TLS record headers with random
  types, versions and lengths; a real ClientHello mutated; a finished handshake
  followed by records that are not encrypted with its keys (random bytes, a plaintext
  Kafka frame).
"""

from __future__ import annotations

import asyncio
import random
import ssl
import struct
from dataclasses import dataclass, field

from tests.fuzzing import ANSWERED_GRACE_S, mutate, synthetic_frame
from zonegate.proxy.codec import encode_request, request_type

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "", "plain"]


def _token(rng: random.Random) -> bytes:
    """An auth_bytes payload: each mechanism's shape, broken in its own ways, or noise."""
    user = rng.choice([b"alice", b"", b"admin", b"\x00", b"x" * 300, rng.randbytes(8)])
    secret = rng.choice([b"alice-secret", b"", b"wrong", rng.randbytes(12)])
    nonce = rng.choice([b"fyko+d2lbbFgONRv9qkxdawL", b"", b",", rng.randbytes(10)])
    forms = [
        b"\x00" + user + b"\x00" + secret,  # PLAIN
        user + b"\x00" + user + b"\x00" + secret,  # PLAIN with an authorization id
        b"\x00" * rng.randint(0, 5),
        b"n,,n=" + user + b",r=" + nonce,  # SCRAM client-first
        b"y,,n=" + user + b",r=" + nonce,
        b"p=tls-unique,,n=" + user + b",r=" + nonce,
        b"n,a=" + user + b",n=" + user + b",r=" + nonce + b",m=ext",
        b"c=biws,r=" + nonce + b",p=" + rng.randbytes(20),  # SCRAM client-final
        b"n,,\x01auth=Bearer " + rng.randbytes(40) + b"\x01\x01",  # OAUTHBEARER
        b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.\x01\x01",
        b"n,,\x01host=x\x01\x01",
        b"\x01",  # the kvsep an OAUTHBEARER client sends after an error
        rng.randbytes(rng.randint(0, 300)),
        rng.randbytes(rng.choice([0, 1, 70_000])),
    ]
    return rng.choice(forms)


def sasl_frame(rng: random.Random) -> bytes:
    """A SaslHandshake or SaslAuthenticate frame, well-formed or (half the time) mutated."""
    if rng.random() < 0.4:
        version = rng.randint(0, 1)
        mechanism = rng.choice([*MECHANISMS, "x" * rng.randint(0, 400)])
        msg = request_type(SASL_HANDSHAKE, version)(mechanism=mechanism)  # type: ignore[call-arg]
    else:
        version = rng.randint(0, 2)
        msg = request_type(SASL_AUTHENTICATE, version)(auth_bytes=_token(rng))  # type: ignore[call-arg]
    frame = encode_request(rng.randrange(2**31), rng.choice(["fuzz", None]), msg)
    if rng.random() < 0.5:
        return mutate(frame, rng, [frame])[1]
    return frame


def _raw_token(rng: random.Random) -> bytes:
    """A size-framed token without a Kafka header (what follows SaslHandshake v0)."""
    body = _token(rng)
    size = rng.choice([len(body)] * 4 + [-1, 0, 2**31 - 1, len(body) + 5])
    return struct.pack(">i", size) + body


@dataclass
class SecureFuzzStats:
    frames: int = 0
    connections: int = 0
    answers: int = 0
    closed_by_node: int = 0
    logins: int = 0  # connections that authenticated before their frames
    tls: dict[str, int] = field(default_factory=dict)  # garbage TLS connections by kind


def _login_frames(user: str, password: str) -> list[bytes]:
    return [
        encode_request(1, "fuzz", request_type(SASL_HANDSHAKE, 1)(mechanism="PLAIN")),  # type: ignore[call-arg]
        encode_request(
            2,
            "fuzz",
            request_type(SASL_AUTHENTICATE, 2)(  # type: ignore[call-arg]
                auth_bytes=b"\x00" + user.encode() + b"\x00" + password.encode()
            ),
        ),
    ]


async def _read_frame(reader: asyncio.StreamReader, seconds: float) -> bytes:
    head = await asyncio.wait_for(reader.readexactly(4), seconds)
    (size,) = struct.unpack(">i", head)
    return await asyncio.wait_for(reader.readexactly(size), seconds)


async def _sasl_connection(
    port: int,
    frames: list[bytes],
    context: ssl.SSLContext | None,
    login: tuple[str, str] | None,
    stats: SecureFuzzStats,
    read_timeout: float,
) -> None:
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1",
            port,
            ssl=context,
            server_hostname="127.0.0.1" if context else None,
            # A fuzz connection is dropped, not closed politely: waiting for the node's
            # close_notify is not what is tested here.
            ssl_shutdown_timeout=1 if context else None,
        )
    except (OSError, ssl.SSLError):
        return
    stats.connections += 1
    try:
        if login is not None:
            for frame in _login_frames(*login):
                writer.write(frame)
                await writer.drain()
                answer = await _read_frame(reader, 10)
            # SaslAuthenticate v2's answer: correlation id, tagged fields, error code 0.
            assert struct.unpack_from(">h", answer, 5)[0] == 0, f"PLAIN login refused: {answer!r}"
            stats.logins += 1
        for frame in frames:
            writer.write(frame)
        await writer.drain()
        stats.frames += len(frames)
        for _ in frames:
            await _read_frame(reader, read_timeout)
            stats.answers += 1
        # Every frame answered: only a close can follow (sent at once after the last
        # answer), so waiting out the whole read timeout would be idle.
        while True:
            await _read_frame(reader, ANSWERED_GRACE_S)
            stats.answers += 1
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        stats.closed_by_node += 1
    except (TimeoutError, OSError):
        pass
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError, ssl.SSLError):
            pass


async def fuzz_sasl(
    port: int,
    connections: int,
    rng: random.Random,
    *,
    context: ssl.SSLContext | None = None,
    login: tuple[str, str] | None = None,
    concurrency: int = 8,
    read_timeout: float = 0.3,
    stats: SecureFuzzStats | None = None,
) -> SecureFuzzStats:
    """`connections` connections, each sending 1-4 SASL frames (sometimes raw tokens after
    a SaslHandshake v0, sometimes another API's frame), after a PLAIN login when `login`
    names a user and password."""
    stats = stats or SecureFuzzStats()
    sem = asyncio.Semaphore(concurrency)

    async def one() -> None:
        frames = [sasl_frame(rng) for _ in range(rng.choice([1, 1, 2, 4]))]
        roll = rng.random()
        if roll < 0.15:
            v0 = request_type(SASL_HANDSHAKE, 0)(mechanism=rng.choice(MECHANISMS))  # type: ignore[call-arg]
            frames = [encode_request(7, "fuzz", v0), *(_raw_token(rng) for _ in range(2))]
        elif roll < 0.3:
            frames.append(synthetic_frame(rng))
        async with sem:
            await _sasl_connection(port, frames, context, login, stats, read_timeout)

    await asyncio.gather(*(one() for _ in range(connections)))
    return stats


# -- garbage TLS records ---------------------------------------------------------------
def _record(rng: random.Random) -> bytes:
    content = rng.choice([20, 21, 22, 23, 24, 0, 255])
    version = rng.choice([0x0301, 0x0303, 0x0304, 0x0200, 0xFFFF])
    body = rng.randbytes(rng.randint(0, 600))
    length = rng.choice([len(body)] * 3 + [0, 0xFFFF, 2**14 + 2048, len(body) + 10])
    return struct.pack(">BHH", content, version, length) + body


def _client_hello(context: ssl.SSLContext) -> bytes:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


async def _handshake(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: ssl.SSLContext
) -> bool:
    """A real TLS handshake driven over the raw stream, so that bytes written after it are
    not TLS of its session; False when the node closed or refused it."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    for _ in range(20):
        try:
            tls.do_handshake()
            writer.write(outgoing.read())  # the client's Finished, in TLS 1.3
            await writer.drain()
            return True
        except ssl.SSLWantReadError:
            writer.write(outgoing.read())
            await writer.drain()
            chunk = await asyncio.wait_for(reader.read(65536), 10)
            if not chunk:
                return False
            incoming.write(chunk)
        except ssl.SSLError:
            return False
    return False


async def _tls_connection(
    port: int, kind: str, rng: random.Random, context: ssl.SSLContext, stats: SecureFuzzStats
) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    stats.connections += 1
    stats.tls[kind] = stats.tls.get(kind, 0) + 1
    try:
        if kind == "noise":
            writer.write(rng.randbytes(rng.randint(1, 2000)))
        elif kind == "records":
            writer.write(b"".join(_record(rng) for _ in range(rng.randint(1, 4))))
        elif kind == "hello":
            hello = bytearray(_client_hello(context))
            for _ in range(rng.randint(1, 8)):
                hello[rng.randrange(len(hello))] = rng.getrandbits(8)
            writer.write(bytes(hello[: rng.randint(1, len(hello))]))
        else:
            if not await _handshake(reader, writer, context):
                return
            if kind == "after-handshake":
                writer.write(_record(rng) if rng.random() < 0.5 else rng.randbytes(300))
            else:  # "kafka-in-clear": a Kafka frame where records of the session belong
                writer.write(synthetic_frame(rng))
        await writer.drain()
        stats.frames += 1
        while await asyncio.wait_for(reader.read(65536), 5):
            pass
        stats.closed_by_node += 1
    except (ConnectionError, asyncio.IncompleteReadError):
        stats.closed_by_node += 1
    except (TimeoutError, OSError):
        pass
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


TLS_KINDS = ("noise", "records", "hello", "after-handshake", "kafka-in-clear")


async def fuzz_tls(
    port: int,
    connections: int,
    rng: random.Random,
    context: ssl.SSLContext,
    *,
    concurrency: int = 8,
    stats: SecureFuzzStats | None = None,
) -> SecureFuzzStats:
    """`connections` connections to a TLS port, each sending one kind of garbage."""
    stats = stats or SecureFuzzStats()
    sem = asyncio.Semaphore(concurrency)

    async def one(kind: str) -> None:
        async with sem:
            await _tls_connection(port, kind, rng, context, stats)

    await asyncio.gather(*(one(TLS_KINDS[i % len(TLS_KINDS)]) for i in range(connections)))
    return stats
