"""Sans-IO Kafka framing and request decoding over kio.

Bytes go in through `FrameDecoder.receive_data`; complete frames come out of
`next_frame`; `decode_request` turns a frame into a typed kio request and its
header, with zonegate's bounded decoder (proxy/decoder.py), never kio's native
reader, so no length read off the wire is trusted; `encode_response` turns a
typed response back into a frame. Nothing here touches a socket, so the codec
is tested without a network.
"""

from __future__ import annotations

import collections
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_writer
from kio.static.constants import EntityType
from kio.static.protocol import RequestPayload, ResponsePayload

from zonegate.proxy.decoder import MalformedMessage, message_reader, read_uvarint
from zonegate.proxy.errors import PeerProtocolError
from zonegate.proxy.legacy_schema import payload_class

_SIZE = struct.Struct(">i")
_SIZE_AND_ID = struct.Struct(">ii")
_HEADER_FIXED = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
API_VERSIONS_KEY = 18


class FrameDecoder:
    """Splits a byte stream into Kafka frames (4-byte big-endian size, then the body).

    `max_frame_bytes` is `socket.request.max.bytes`: a larger size prefix is the
    peer's fault and is raised before any of the body is buffered.
    """

    def __init__(self, max_frame_bytes: int) -> None:
        self._max = max_frame_bytes
        # Received chunks not yet framed; joined only when a frame is complete, so a
        # 1 MiB produce request arriving in 64 KiB reads is copied once, not 16 times.
        # `_offset` is how much of the first chunk is taken already: a chunk holding
        # several frames is sliced once per frame, never copied as a remainder.
        self._chunks: collections.deque[bytes] = collections.deque()
        self._offset = 0
        self._buffered = 0
        self._size: int | None = None

    def receive_data(self, data: bytes) -> None:
        if data:
            self._chunks.append(data)
            self._buffered += len(data)

    def _take(self, n: int) -> bytes:
        """The next n buffered bytes, copying each byte at most once."""
        parts: list[bytes] = []
        need = n
        while need:
            chunk = self._chunks[0]
            start = self._offset
            left = len(chunk) - start
            if left <= need:
                parts.append(chunk[start:] if start else chunk)
                self._chunks.popleft()
                self._offset = 0
                need -= left
            else:
                parts.append(chunk[start : start + need])
                self._offset = start + need
                need = 0
        self._buffered -= n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def next_size(self) -> int | None:
        """The size of the next frame's body, once its prefix is here."""
        if self._size is None:
            if self._buffered < 4:
                return None
            (size,) = _SIZE.unpack(self._take(4))
            if size < 0 or size > self._max:
                raise PeerProtocolError(
                    f"frame size {size} outside 0..{self._max} (socket.request.max.bytes)"
                )
            self._size = size
        return self._size

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or None when more data is needed."""
        if self.next_size() is None or self._size is None or self._buffered < self._size:
            return None
        frame = self._take(self._size) if self._size else b""
        self._size = None
        return frame

    @property
    def buffered(self) -> int:
        return self._buffered


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    header: RequestHeader
    body: RequestPayload


def peek_header(frame: bytes) -> tuple[RequestHeader, int]:
    """The header fields every version has, and the offset just after the client id."""
    if len(frame) < _HEADER_FIXED.size:
        raise PeerProtocolError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id, client_len = _HEADER_FIXED.unpack_from(frame, 0)
    offset = _HEADER_FIXED.size
    client_id: str | None = None
    if client_len >= 0:
        end = offset + client_len
        if end > len(frame):
            raise PeerProtocolError("request header client id runs past the frame")
        try:
            client_id = frame[offset:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PeerProtocolError("request header client id is not UTF-8") from exc
        offset = end
    return RequestHeader(api_key, api_version, correlation_id, client_id), offset


def _skip_tagged_fields(frame: bytes, offset: int) -> int:
    try:
        count, offset = read_uvarint(frame, offset)
        for _ in range(count):
            _tag, offset = read_uvarint(frame, offset)
            size, offset = read_uvarint(frame, offset)
            offset += size
    except MalformedMessage as exc:
        raise PeerProtocolError(f"request header tagged fields: {exc.reason}") from None
    if offset > len(frame):
        raise PeerProtocolError("request header tagged fields run past the frame")
    return offset


@cache
def request_type(api_key: int, api_version: int) -> type[RequestPayload]:
    """kio's request class, or ours for a version Kafka 4 removed (proxy/legacy_schema)."""
    legacy = payload_class(api_key, api_version, EntityType.request)
    return legacy if legacy is not None else load_request_schema(api_key, api_version)


@cache
def response_type(api_key: int, api_version: int) -> type[ResponsePayload]:
    legacy = payload_class(api_key, api_version, EntityType.response)
    return legacy if legacy is not None else load_response_schema(api_key, api_version)


@cache
def _writer(cls: type[Any]) -> Callable[[io.BytesIO, Any], None]:
    return entity_writer(cls)


def decode_request(frame: bytes, header: RequestHeader, body_offset: int) -> DecodedRequest:
    """Decodes the body of a request whose (api key, version) the caller has checked is served."""
    cls = request_type(header.api_key, header.api_version)
    offset = body_offset
    if cls.__flexible__:
        offset = _skip_tagged_fields(frame, offset)
    try:
        body, _ = message_reader(cls)(frame, offset)
    except MalformedMessage as exc:
        what = f"{cls.__name__} v{header.api_version}"
        raise PeerProtocolError(f"cannot decode {what}: {exc}") from None
    # Bytes after the body are ignored, as Kafka's broker ignores them: librdkafka
    # sends a few after some flexible-version requests (Metadata v12, for one).
    return DecodedRequest(header, body)


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response body its handler encoded itself, for `encode_response` to frame as is.

    Produce answers are encoded by hand (proxy/handlers/produce.py): building
    kio's dataclasses and walking them with its generic writer cost more CPU
    than anything else on the produce path but the record batches themselves.
    `flexible` says whether the response header carries a tagged-field section.
    """

    flexible: bool
    data: bytes
    throttle_at: int = -1  # where the int32 throttle_time_ms lies in `data` (-1: none)


def encode_response(
    correlation_id: int, api_key: int, response: ResponsePayload | EncodedBody
) -> bytes:
    """A complete response frame (size prefix included)."""
    if isinstance(response, EncodedBody):
        tags = b"\x00" if response.flexible else b""  # response header v1: no tagged fields
        size = 4 + len(tags) + len(response.data)
        return b"".join((_SIZE_AND_ID.pack(size, correlation_id), tags, response.data))
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    buf.write(struct.pack(">i", correlation_id))
    # ApiVersions answers always use header v0, so that a client that asked with
    # a version we do not know can still read the answer (KIP-511).
    if type(response).__flexible__ and api_key != API_VERSIONS_KEY:
        buf.write(b"\x00")  # no tagged fields
    _writer(type(response))(buf, response)
    data = buf.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    out = bytes(data)
    del data
    return out


def encode_request(correlation_id: int, client_id: str | None, request: RequestPayload) -> bytes:
    """A complete request frame; used by tests and node-to-node tools."""
    cls = type(request)
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    buf.write(struct.pack(">hhi", cls.__api_key__, cls.__version__, correlation_id))
    if client_id is None:
        buf.write(struct.pack(">h", -1))
    else:
        raw = client_id.encode()
        buf.write(struct.pack(">h", len(raw)))
        buf.write(raw)
    if cls.__flexible__:
        buf.write(b"\x00")
    _writer(cls)(buf, request)
    data = buf.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    out = bytes(data)
    del data
    return out


def decode_response(frame: bytes, cls: type[ResponsePayload]) -> tuple[int, ResponsePayload]:
    """(correlation id, response) of a response frame body; used by tests."""
    (correlation_id,) = _SIZE.unpack_from(frame, 0)
    offset = 4
    if cls.__flexible__ and cls.__api_key__ != API_VERSIONS_KEY:
        offset = _skip_tagged_fields(frame, offset)
    body, _ = message_reader(cls)(frame, offset)
    return correlation_id, body
