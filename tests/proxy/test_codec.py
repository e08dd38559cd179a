"""The sans-IO codec, with no network: framing, caps, header and body decoding."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from zonegate.proxy.codec import (
    FrameDecoder,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
)
from zonegate.proxy.errors import PeerProtocolError
from zonegate.proxy.schema import make

pytestmark = pytest.mark.unit


def test_frames_split_across_reads_and_coalesced() -> None:
    req = MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    wire = encode_request(5, "cid", req) + encode_request(6, None, req)
    dec = FrameDecoder(1024)
    frames = []
    for i in range(len(wire)):
        dec.receive_data(wire[i : i + 1])
        while (f := dec.next_frame()) is not None:
            frames.append(f)
    assert len(frames) == 2
    h, off = peek_header(frames[0])
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 12, 5, "cid")
    assert decode_request(frames[0], h, off).body == req
    h2, _ = peek_header(frames[1])
    assert h2.client_id is None and h2.correlation_id == 6
    assert dec.buffered == 0


def test_oversized_frame_is_refused_before_buffering() -> None:
    dec = FrameDecoder(100)
    dec.receive_data(struct.pack(">i", 101))
    with pytest.raises(PeerProtocolError, match="socket.request.max.bytes"):
        dec.next_frame()


def test_negative_size_is_refused() -> None:
    dec = FrameDecoder(100)
    dec.receive_data(struct.pack(">i", -1))
    with pytest.raises(PeerProtocolError):
        dec.next_frame()


def test_trailing_bytes_after_body_are_ignored_as_kafka_does() -> None:
    # The frame librdkafka 2.16 sends for Metadata v12: three bytes follow the body.
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    h, off = peek_header(frame)
    assert (h.api_key, h.api_version, h.client_id) == (3, 12, "rdkafka")
    body = decode_request(frame, h, off).body
    assert body.topics is None and body.allow_auto_topic_creation is False


def test_truncated_body_is_the_peers_fault() -> None:
    req = MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    frame = encode_request(1, "c", req)[4:-2]
    h, off = peek_header(frame)
    with pytest.raises(PeerProtocolError, match="cannot decode"):
        decode_request(frame, h, off)


def test_bad_header_tagged_fields_are_the_peers_fault() -> None:
    # Metadata v12, client id "c", then the header's tagged fields: a count whose varint
    # ends with the frame, then a count that runs on too long.
    head = bytes.fromhex("0003000c00000001000163")
    for tail, reason in ((b"\x80", "runs past the end"), (b"\xff" * 6, "longer than 5 bytes")):
        frame = head + tail
        h, off = peek_header(frame)
        with pytest.raises(PeerProtocolError, match=f"request header tagged fields: .*{reason}"):
            decode_request(frame, h, off)


def test_response_round_trip_with_flexible_header() -> None:
    resp = make(
        MetadataResponse,
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id="c",
        controller_id=1,
        topics=(),
        cluster_authorized_operations=0,
    )
    wire = encode_response(42, 3, resp)
    (size,) = struct.unpack(">i", wire[:4])
    assert size == len(wire) - 4
    cid, back = decode_response(wire[4:], MetadataResponse)
    assert cid == 42 and back == resp
    assert ErrorCode.none == 0
