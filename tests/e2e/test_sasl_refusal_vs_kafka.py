"""A request refused during SASL authentication, against Apache Kafka 4.3.1 itself.

Kafka's SaslServerAuthenticator treats a request other than ApiVersions and SaslHandshake
in two ways: before SaslHandshake (handleKafkaRequest) it fails before building any
answer and the connection closes unanswered; between SaslHandshake and SaslAuthenticate
(handleSaslToken) it answers the request with its API's error response,
ILLEGAL_SASL_STATE (34), then closes. The same raw frames go to a Kafka broker and to a
zonegate node, each with a SASL_PLAINTEXT listener, and get the same treatment.
"""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from tests.apache_kafka import ApacheKafkaBroker
from tests.node_harness import free_port_block
from tests.security.certs import TestPki
from tests.security.secure_node import SecureNode, plain_jaas, security_properties
from zonegate.proxy.codec import decode_response, encode_request

pytestmark = pytest.mark.e2e

JAAS = plain_jaas({"alice": "alice-secret"})
METADATA = MetadataRequest(
    topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="orders"),),  # type: ignore[arg-type]
    allow_auto_topic_creation=False,
    include_topic_authorized_operations=False,
)


class SaslKafka(ApacheKafkaBroker):
    """Kafka with a SASL_PLAINTEXT listener (PLAIN) beside its PLAINTEXT one."""

    sasl_port = 0

    def _write_config(self) -> Path:
        path = super()._write_config()
        self.sasl_port = free_port_block(1)
        plain, sasl = f"PLAINTEXT://127.0.0.1:{self.port}", f"127.0.0.1:{self.sasl_port}"
        text = path.read_text().replace(plain, f"{plain},SASL_PLAINTEXT://{sasl}")
        text = text.replace(
            "PLAINTEXT:PLAINTEXT\n", "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n"
        )
        text += "sasl.enabled.mechanisms=PLAIN\n"
        text += f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n"
        path.write_text(text)
        return path


@pytest.fixture(scope="module")
def ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    root = tmp_path_factory.mktemp("sasl-refusal")
    kafka = SaslKafka(root / "kafka")
    node = SecureNode(root / "node", ("PLAINTEXT", "SASL_PLAINTEXT"))
    props = security_properties(TestPki(root / "pki"), node.ports, None)
    props["sasl.enabled.mechanisms"] = "PLAIN"
    for key in [k for k in props if "scram" in k]:
        del props[key]
    node.write_config(props)
    try:
        kafka.start()
        node.start()
        yield {"kafka": kafka.sasl_port, "zonegate": node.ports["SASL_PLAINTEXT"]}
    finally:
        node.stop()
        kafka.stop()


def _frame(sock: socket.socket) -> bytes | None:
    """The next answer frame, or None when the peer closed the connection first."""

    def read(n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    size = read(4)
    return None if size is None else read(struct.unpack(">i", size)[0])


def _metadata_refusal(port: int, after_handshake: bool) -> tuple[object, bool]:
    """(what answered the Metadata request, whether the connection closed after)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        if after_handshake:
            sock.sendall(encode_request(1, "probe", SaslHandshakeRequest(mechanism="PLAIN")))
            frame = _frame(sock)
            assert frame is not None
            assert decode_response(frame, SaslHandshakeResponse)[1].error_code == 0
        sock.sendall(encode_request(2, "probe", METADATA))
        frame = _frame(sock)
        if frame is None:
            return None, True
        cid, answer = decode_response(frame, MetadataResponse)
        seen = (cid, [(t.name, t.error_code.value) for t in answer.topics], answer.brokers)
        return seen, _frame(sock) is None


@pytest.mark.parametrize("after_handshake", [False, True])
def test_zonegate_refuses_as_kafka_does(ports: dict[str, int], after_handshake: bool) -> None:
    kafka = _metadata_refusal(ports["kafka"], after_handshake)
    zonegate = _metadata_refusal(ports["zonegate"], after_handshake)
    assert zonegate == kafka
    expected = (2, [("orders", 34)], ()) if after_handshake else None
    assert kafka == (expected, True)
