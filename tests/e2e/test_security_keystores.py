"""Real clients over SSL listeners whose keystores take Kafka's other forms (issue 25):
a PKCS12 keystore and truststore (`ssl.keystore.type=PKCS12`, with their passwords),
and inline PEM (`ssl.keystore.key`, `ssl.keystore.certificate.chain`,
`ssl.truststore.certificates`) spread over continuation lines as a Kafka
server.properties writes it. The stores are trustme's material converted with
`cryptography`. Each client creates a topic, produces and consumes in a group over
each listener, with a client certificate checked against that listener's truststore.
A JKS keystore stops the node at start with the reason and the keytool line.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.security.certs import (
    ClientCert,
    TestPki,
    pkcs12_keystore,
    pkcs12_truststore,
    properties_value,
)
from tests.security.client_configs import Login
from tests.security.roundtrip import CLIENTS, VALUES, roundtrip
from tests.security.secure_node import SecureNode

pytestmark = pytest.mark.e2e

LISTENERS = ("PLAINTEXT", "P12", "INLINE")
STORE_PASSWORD = "p12-secret"
KEY_PASSWORD = "key-secret"


@dataclass
class Stores:
    node: SecureNode
    pki: TestPki
    alice: ClientCert

    def login(self, listener: str) -> Login:
        return Login(
            self.node.bootstrap_of(listener), "SSL", ca=self.pki.ca_file, client_cert=self.alice
        )


def _properties(pki: TestPki, ports: dict[str, int]) -> dict[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    keystore, truststore = pki.dir / "server.p12", pki.dir / "ca.p12"
    server_pem = pki.server_pem.read_bytes()
    keystore.write_bytes(pkcs12_keystore(server_pem, STORE_PASSWORD))
    truststore.write_bytes(pkcs12_truststore(pki.ca_file.read_bytes(), STORE_PASSWORD))
    key = serialization.load_pem_private_key(server_pem, None)
    encrypted_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
    )
    chain = b"".join(
        c.public_bytes(serialization.Encoding.PEM)
        for c in x509.load_pem_x509_certificates(server_pem)
    )
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,P12:SSL,INLINE:SSL",
        "ssl.client.auth": "required",
        "listener.name.p12.ssl.keystore.type": "PKCS12",
        "listener.name.p12.ssl.keystore.location": str(keystore),
        "listener.name.p12.ssl.keystore.password": STORE_PASSWORD,
        "listener.name.p12.ssl.key.password": STORE_PASSWORD,
        "listener.name.p12.ssl.truststore.type": "PKCS12",
        "listener.name.p12.ssl.truststore.location": str(truststore),
        "listener.name.p12.ssl.truststore.password": STORE_PASSWORD,
        "listener.name.inline.ssl.keystore.type": "PEM",
        "listener.name.inline.ssl.keystore.key": properties_value(encrypted_key),
        "listener.name.inline.ssl.key.password": KEY_PASSWORD,
        "listener.name.inline.ssl.keystore.certificate.chain": properties_value(chain),
        "listener.name.inline.ssl.truststore.type": "PEM",
        "listener.name.inline.ssl.truststore.certificates": properties_value(
            pki.ca_file.read_bytes()
        ),
    }


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    tmp = tmp_path_factory.mktemp("keystores")
    pki = TestPki(tmp / "pki")
    node = SecureNode(tmp / "node", LISTENERS)
    # Each round trip's group has one member: Kafka's 3 s wait for more members before
    # a new group's first assignment would only idle (tests/apache_kafka.py sets 0 too).
    node.write_config({**_properties(pki, node.ports), "group.initial.rebalance.delay.ms": "0"})
    try:
        node.start()
        yield Stores(node, pki, pki.client("alice", "payments"))
    finally:
        node.stop()


@pytest.mark.parametrize("listener", ["P12", "INLINE"])
@pytest.mark.parametrize("client", CLIENTS)
def test_client_produces_and_consumes_over_each_keystore_form(
    stores: Stores, client: str, listener: str
) -> None:
    name = f"ks-{client}-{listener}".lower()
    got = roundtrip(client, stores.login(listener), name, name + "-group")
    assert got == sorted(VALUES)


def test_a_client_certificate_from_another_ca_is_refused_by_the_pkcs12_truststore(
    stores: Stores,
) -> None:
    """The PKCS12 truststore is what client certificates are checked against."""
    import socket
    import ssl

    foreign = stores.pki.client("mallory", other_ca=True)
    context = ssl.create_default_context(cafile=str(stores.pki.ca_file))
    context.load_cert_chain(str(foreign.cert), str(foreign.key))
    with socket.create_connection(("127.0.0.1", stores.node.ports["P12"]), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x00\x00\x00\x00")
                if not tls.recv(1):  # TLS 1.3: the refusal comes after the handshake
                    raise ConnectionError("closed")


def test_a_jks_keystore_stops_the_node_with_the_reason(tmp_path: Path) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(
        "listeners=SSL://127.0.0.1:0\n"
        "ssl.keystore.type=JKS\n"
        "ssl.keystore.location=/etc/kafka/server.keystore.jks\n"
        "ssl.keystore.password=changeit\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "zonegate", "node", "--config", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "ssl.keystore.type=JKS" in done.stderr
    assert "no well-kept Python library reads it" in done.stderr
    assert "keytool -importkeystore" in done.stderr
