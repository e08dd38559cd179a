"""A minimal Kafka client over the project's own codec, for the bad-input tests.

Real clients never send malformed frames, so the tests that do use this.
"""

from __future__ import annotations

import datetime
import socket
import struct
from typing import Any

from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i16, i32
from kio.static.protocol import RequestPayload

from zonegate.proxy.codec import decode_response, encode_request, response_type


class RawConnection:
    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._cid = 0

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, req: RequestPayload, client_id: str | None = "raw-test") -> Any:
        self._cid += 1
        self.sock.sendall(encode_request(self._cid, client_id, req))
        frame = self.read_frame()
        cid, body = decode_response(frame, response_type(req.__api_key__, req.__version__))
        assert cid == self._cid
        return body

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the node")
            buf += chunk
        return buf

    def is_closed_by_peer(self) -> bool:
        """True when the node closed the connection (recv returns EOF or a reset)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, OSError):
            return True

    def close(self) -> None:
        self.sock.close()


def produce_one(port: int, topic: str, batch: bytes) -> Any:
    """The partition's answer to one Produce (v9, acks=-1) of `batch` to partition 0."""
    conn = RawConnection(port)
    try:
        resp = conn.request(
            ProduceRequest(
                transactional_id=None,
                acks=i16(-1),
                timeout=datetime.timedelta(seconds=30),
                topic_data=(
                    TopicProduceData(
                        name=topic,  # type: ignore[arg-type]
                        partition_data=(PartitionProduceData(index=i32(0), records=batch),),
                    ),
                ),
            )
        )
        return resp.responses[0].partition_responses[0]
    finally:
        conn.close()
