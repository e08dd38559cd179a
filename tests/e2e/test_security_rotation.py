"""Certificate rotation under load (issue 25): the server's PEM file is replaced, as
cert-manager does, while a producer runs over TLS. New connections get the new
certificate (its serial number), the producer's connection is not dropped, and every
record the producer was told was written is read back."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from cryptography import x509

from tests.security.certs import TestPki
from tests.security.client_configs import Login, confluent
from tests.security.secure_node import SecureNode, security_properties

pytestmark = pytest.mark.e2e


@dataclass
class Rotating:
    node: SecureNode
    pki: TestPki


@pytest.fixture(scope="module")
def rotating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rotating]:
    tmp = tmp_path_factory.mktemp("rotation")
    pki = TestPki(tmp / "pki")
    node = SecureNode(tmp / "node", ("PLAINTEXT", "SSL"))
    node.write_config(security_properties(pki, node.ports, None, client_auth="none"))
    try:
        yield Rotating(node.start(), pki)
    finally:
        node.stop()


def served_serial(port: int, ca: str) -> int:
    """The serial number of the certificate a new TLS connection is given."""
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


class Load:
    """A producer sending numbered records over TLS until stopped, remembering which were
    acknowledged, and librdkafka's count of connections it made to the node."""

    def __init__(self, login: Login, topic: str) -> None:
        from confluent_kafka import Producer

        self.acked: set[int] = set()
        self.errors: list[str] = []
        self.connects = 0
        self._stop = threading.Event()
        self._producer = Producer(
            {
                **confluent(login),
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "statistics.interval.ms": 200,
                "stats_cb": self._stats,
            }
        )
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _stats(self, stats_json: str) -> None:
        brokers = json.loads(stats_json).get("brokers", {}).values()
        self.connects = sum(int(b.get("connects", 0)) for b in brokers if b.get("nodeid", -1) >= 0)

    def _ack(self, i: int):  # type: ignore[no-untyped-def]
        def cb(err, _msg):  # type: ignore[no-untyped-def]
            if err is None:
                self.acked.add(i)
            else:
                self.errors.append(str(err))

        return cb

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(self._topic, b"%d" % i, on_delivery=self._ack(i))
            self._producer.poll(0.002)
            i += 1
        self._producer.flush(60)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def test_rotated_certificate_is_served_to_new_connections_under_load(rotating: Rotating) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.e2e.clients import ck_read_values

    pki, node = rotating.pki, rotating.node
    ssl_port = node.ports["SSL"]
    old = pki.server_serial
    assert served_serial(ssl_port, str(pki.ca_file)) == old
    topic = "sec-rotation"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    load = Load(Login(node.bootstrap_of("SSL"), "SSL", ca=pki.ca_file), topic).start()
    try:
        time.sleep(2)
        assert load.acked, "the producer got nothing acknowledged before the rotation"
        connects_before = load.connects
        new = pki.rotate_server()
        assert new != old
        deadline = time.monotonic() + 30
        seen = old
        while seen != new and time.monotonic() < deadline:
            time.sleep(0.25)
            seen = served_serial(ssl_port, str(pki.ca_file))
        assert seen == new, "new connections still get the old certificate after 30 s"
        acked_at_rotation = len(load.acked)
        time.sleep(2)
        assert len(load.acked) > acked_at_rotation, "the producer stalled after the rotation"
        assert load.connects == connects_before, "the rotation dropped the producer's connection"
    finally:
        load.stop()
    assert not load.errors, load.errors[:5]
    values = {int(v) for v in ck_read_values(node.bootstrap, topic, 2, len(load.acked))}
    lost = load.acked - values
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
