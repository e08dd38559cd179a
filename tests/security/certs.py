"""Test certificates from trustme, written as the PEM files a node and its clients read.

One cluster CA signs the server certificate (127.0.0.1 and localhost) and the client
certificates; a second, unrelated CA signs a client certificate the node must not trust.
The server's key and certificate chain go in one file, as Kafka's `ssl.keystore.type=PEM`
with `ssl.keystore.location` wants them; `rotate_server` replaces that file the way
cert-manager does (a new file moved over the old one), so a test can watch the node pick
the new certificate up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization

SERVER_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class ClientCert:
    """A client's certificate: `pem` holds its key and chain (Kafka's PEM keystore layout),
    `cert`/`key` the same split in two (librdkafka's and Python's ssl layout)."""

    pem: Path
    cert: Path
    key: Path
    subject: str  # RFC 2253, as Java's X500Principal prints it


def _write(leaf: trustme.LeafCert, directory: Path, name: str) -> ClientCert:
    pem = directory / f"{name}.pem"
    cert = directory / f"{name}.crt"
    key = directory / f"{name}.key"
    # PKCS#8, the one key encoding Kafka's PEM keystore reads (trustme writes SEC1).
    pkcs8 = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    chain = b"".join(c.bytes() for c in leaf.cert_chain_pems)
    pem.write_bytes(pkcs8 + chain)
    cert.write_bytes(chain)
    key.write_bytes(pkcs8)
    subject = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).subject
    return ClientCert(pem, cert, key, subject.rfc4514_string())


def serial_of(pem: bytes) -> int:
    """The serial number of the first certificate in `pem`."""
    return x509.load_pem_x509_certificate(pem).serial_number


class TestPki:
    """A cluster CA, the server's certificate, and client certificates, as files in `directory`."""

    __test__ = False  # not a pytest class

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.ca = trustme.CA(organization_name="zonegate test cluster")
        self.other_ca = trustme.CA(organization_name="somebody else")
        self.ca_file = directory / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.other_ca_file = directory / "other-ca.pem"
        self.other_ca.cert_pem.write_to_path(str(self.other_ca_file))
        # The server's PEM keystore: key then chain, one file (ssl.keystore.location).
        self.server_pem = directory / "server.pem"
        self.server_serial = self._issue_server(self.server_pem)

    def _issue_server(self, path: Path) -> int:
        leaf = self.ca.issue_cert(*SERVER_NAMES, common_name="zonegate-node")
        tmp = path.with_suffix(".new")
        leaf.private_key_and_cert_chain_pem.write_to_path(str(tmp))
        os.replace(tmp, path)  # atomic: a reader sees the old file or the new, never half
        return serial_of(leaf.cert_chain_pems[0].bytes())

    def rotate_server(self) -> int:
        """Replaces the server's key and certificate with new ones from the same CA; the
        new certificate's serial number."""
        self.server_serial = self._issue_server(self.server_pem)
        return self.server_serial

    def client(self, name: str, unit: str = "clients", other_ca: bool = False) -> ClientCert:
        """A client certificate with subject CN=name,OU=unit,O=... from the cluster CA
        (or from the unrelated CA)."""
        ca = self.other_ca if other_ca else self.ca
        leaf = ca.issue_cert(f"{name}.clients.test", common_name=name, organization_unit_name=unit)
        return _write(leaf, self.dir, ("foreign-" if other_ca else "") + name)


# -- PKCS12 stores, as keytool writes them (ssl.keystore.type=PKCS12) ------------------
def pkcs12_keystore(pem: bytes, password: str) -> bytes:
    """A PKCS12 keystore of the key and certificate chain in `pem` (key, then leaf first)."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    key = serialization.load_pem_private_key(pem, None)
    leaf, *rest = x509.load_pem_x509_certificates(pem)
    return pkcs12.serialize_key_and_certificates(
        b"zonegate",
        key,  # type: ignore[arg-type]
        leaf,
        rest or None,
        serialization.BestAvailableEncryption(password.encode()),
    )


def pkcs12_truststore(ca_pem: bytes, password: str) -> bytes:
    """A PKCS12 truststore: the CA certificates in `ca_pem`, no key."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    return pkcs12.serialize_key_and_certificates(
        None,
        None,
        None,
        x509.load_pem_x509_certificates(ca_pem),
        serialization.BestAvailableEncryption(password.encode()),
    )


def properties_value(pem: bytes) -> str:
    """PEM text as a Kafka server.properties spreads an inline value (ssl.keystore.key=)
    over lines: each line but the last ends in ` \\`, continued on the next."""
    return " \\\n    ".join(line.strip() for line in pem.decode().splitlines() if line.strip())
