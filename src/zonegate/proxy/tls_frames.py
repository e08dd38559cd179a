"""Kafka frames read straight out of a TLS session: `FrameDecoder`'s interface
(proxy/codec.py) for TLS listeners, sans-IO like it.

The plaintext path takes the event loop's bytes as they come and copies each frame
once, when it is complete. Decrypting records into bytes of their own, then framing
those, would copy every byte twice more and allocate (and page-fault) a fresh block
per read. Here records are decrypted on demand into the frame itself: the 4-byte size
first, then exactly the frame's body into an assembly buffer, which comes out in one
bytes copy once whole, as the plaintext path's frames do. OpenSSL keeps what a record
holds beyond what was asked for until the next read, so no byte is copied twice.

Assembly buffers are reused: a frame taking several socket reads (a 1 MB produce
request takes four or more) keeps its buffer across them, then gives it back to the
thread's pool for the next frame of any connection. A fresh one for each frame costs
the zeroing of a bytearray and, as glibc maps, trims and regrows blocks that large,
page faults on every page; the pool keeps a few, of bounded size.
"""

from __future__ import annotations

import struct
import threading

from zonegate.proxy.errors import PeerProtocolError
from zonegate.proxy.tls import TlsSession

_SIZE = struct.Struct(">i")
# Pooled buffers: how many a thread keeps, the largest kept, and the smallest made (sizes
# are rounded up to a power of two, so frames of a producer's usual sizes share them).
POOL_KEEP = 4
POOL_MAX_BYTES = 8 * 1024 * 1024
_POOL_MIN_BYTES = 64 * 1024
_pool_local = threading.local()


def _take(size: int) -> bytearray:
    """A buffer of at least `size` bytes: a pooled one, else a new one."""
    pool: list[bytearray] | None = getattr(_pool_local, "pool", None)
    if pool is None:
        pool = _pool_local.pool = []
    for i, buf in enumerate(pool):
        if len(buf) >= size:
            return pool.pop(i)
    return bytearray(max(_POOL_MIN_BYTES, 1 << (size - 1).bit_length()))


def _give_back(buf: bytearray) -> None:
    pool: list[bytearray] = _pool_local.pool
    if len(buf) > POOL_MAX_BYTES:
        return
    if len(pool) >= POOL_KEEP:
        smallest = min(range(len(pool)), key=lambda i: len(pool[i]))
        if len(pool[smallest]) >= len(buf):
            return
        pool.pop(smallest)
    pool.append(buf)


class TlsFrameReader:
    """Splits a TLS session's application data into Kafka frames (4-byte big-endian size,
    then the body); `max_frame_bytes` is `socket.request.max.bytes`, checked before any
    of the body is read. TlsError (proxy/tls.py) when the records are not valid TLS;
    when the client closes its side, `session.peer_closed` is set and no frame comes."""

    def __init__(self, session: TlsSession, max_frame_bytes: int) -> None:
        self._tls = session
        self._max = max_frame_bytes
        self._prefix = bytearray(4)
        self._prefix_n = 0
        self._size: int | None = None
        self._buf: bytearray | None = None  # the frame being assembled
        self._got = 0

    def receive_data(self, data: bytes | memoryview) -> None:
        """Records received; the session's BIO copies them."""
        self._tls.feed(data)

    def next_size(self) -> int | None:
        """The size of the next frame's body, once its prefix is decrypted."""
        if self._size is None:
            with memoryview(self._prefix) as view:
                self._prefix_n += self._tls.fill(view[self._prefix_n :])
            if self._prefix_n < 4:
                return None
            (size,) = _SIZE.unpack(self._prefix)
            if size < 0 or size > self._max:
                raise PeerProtocolError(
                    f"frame size {size} outside 0..{self._max} (socket.request.max.bytes)"
                )
            self._size, self._prefix_n = size, 0
        return self._size

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or None when more records are needed."""
        size = self.next_size()
        if size is None:
            return None
        if size:
            buf = self._buf
            if buf is None:
                buf = self._buf = _take(size)
                self._got = 0
            with memoryview(buf) as view:
                self._got += self._tls.fill(view[self._got : size])
                if self._got < size:
                    return None
                frame = bytes(view[:size])
            self._buf = None
            _give_back(buf)
        else:
            frame = b""
        self._size = None
        return frame
