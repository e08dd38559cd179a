"""proxy/keystores.py without sockets: PKCS12 stores (made from trustme's material with
`cryptography`, as keytool would write them), inline PEM as a properties file joins it,
each giving a context a client handshakes with over memory; wrong passwords refused by
name; a rotated PKCS12 file read again."""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from tests.proxy.test_tls import _client, _handshake, _later, _serial
from tests.security.certs import pkcs12_keystore, pkcs12_truststore
from zonegate.proxy.keystores import pem_blocks
from zonegate.proxy.tls import (
    ServerContexts,
    TlsSession,
    TlsSettings,
    TlsSettingsError,
    build_context,
)
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit
PASSWORD = "store-secret"


def write_pkcs12_keystore(leaf: trustme.LeafCert, path: Path, password: str = PASSWORD) -> None:
    path.write_bytes(pkcs12_keystore(leaf.private_key_and_cert_chain_pem.bytes(), password))


def write_pkcs12_truststore(ca: trustme.CA, path: Path, password: str = PASSWORD) -> None:
    path.write_bytes(pkcs12_truststore(ca.cert_pem.bytes(), password))


def _key(leaf: trustme.LeafCert) -> PrivateKeyTypes:
    return serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)


def _pkcs12_settings(ca: trustme.CA, tmp_path: Path) -> TlsSettings:
    keystore, truststore = tmp_path / "server.p12", tmp_path / "ca.p12"
    write_pkcs12_keystore(ca.issue_cert("localhost", "127.0.0.1"), keystore)
    write_pkcs12_truststore(ca, truststore)
    return TlsSettings(
        keystore=keystore,
        keystore_type="PKCS12",
        keystore_password=PASSWORD,
        truststore=truststore,
        truststore_type="PKCS12",
        truststore_password=PASSWORD,
        client_auth="required",
    )


def test_a_pkcs12_keystore_and_truststore_serve_mutual_tls(tmp_path: Path) -> None:
    ca = trustme.CA()
    server = TlsSession(build_context(_pkcs12_settings(ca, tmp_path)))
    alice = ca.issue_cert("alice.clients.test", common_name="alice")
    _handshake(server, _client(ca, alice))
    assert server.peer_dn() is not None and "CN=alice" in server.peer_dn()  # type: ignore[operator]


def test_a_wrong_pkcs12_password_is_refused_by_name(tmp_path: Path) -> None:
    settings = _pkcs12_settings(trustme.CA(), tmp_path)
    with pytest.raises(
        TlsSettingsError, match=r"ssl.keystore.location .*a wrong ssl.keystore.password"
    ):
        build_context(dataclasses.replace(settings, keystore_password="nope"))
    with pytest.raises(
        TlsSettingsError, match=r"ssl.truststore.location .* ssl.truststore.password"
    ):
        build_context(dataclasses.replace(settings, truststore_password="nope"))


def test_a_pkcs12_truststore_without_a_key_is_not_a_keystore(tmp_path: Path) -> None:
    ca = trustme.CA()
    settings = _pkcs12_settings(ca, tmp_path)
    with pytest.raises(TlsSettingsError, match="no private key with its certificate"):
        build_context(dataclasses.replace(settings, keystore=settings.truststore))


def _one_line(pem: bytes) -> str:
    """PEM as a properties file's continuation lines join it: `key=-----BEGIN ...----- \\`
    then `MIIE... \\` lines, leading blanks dropped: one line, blanks between parts."""
    return " ".join(line.strip() for line in pem.decode().splitlines())


def test_inline_pem_joined_on_one_line_serves(tmp_path: Path) -> None:
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    key_pem = _key(leaf).private_bytes(  # PKCS#8, encrypted: ssl.key.password
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"key-secret"),
    )
    settings = TlsSettings(
        keystore=None,
        keystore_key=_one_line(key_pem),
        keystore_certificate_chain=_one_line(b"".join(p.bytes() for p in leaf.cert_chain_pems)),
        key_password="key-secret",
        truststore_certificates=_one_line(ca.cert_pem.bytes()),
        client_auth="requested",
    )
    server = TlsSession(build_context(settings))
    _handshake(server, _client(ca, ca.issue_cert("bob.clients.test", common_name="bob")))
    assert "CN=bob" in (server.peer_dn() or "")
    with pytest.raises(TlsSettingsError, match="ssl.keystore.key: .*a wrong ssl.key.password"):
        build_context(dataclasses.replace(settings, key_password="nope"))
    with pytest.raises(TlsSettingsError, match="ssl.truststore.certificates: no PEM certificate"):
        build_context(dataclasses.replace(settings, truststore_certificates="not pem"))


def test_pem_blocks_read_as_kafkas_pem_parser_reads_them() -> None:
    ca = trustme.CA()
    pem = ca.cert_pem.bytes()
    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    assert pem_blocks(pem.decode()) == [("CERTIFICATE", der)]
    assert pem_blocks(_one_line(pem)) == [("CERTIFICATE", der)]
    assert pem_blocks(_one_line(pem + pem)) == [("CERTIFICATE", der)] * 2
    assert pem_blocks("no pem here") == []


def test_a_rotated_pkcs12_keystore_is_read_again(tmp_path: Path) -> None:
    ca = trustme.CA()
    settings = dataclasses.replace(_pkcs12_settings(ca, tmp_path), client_auth="none")
    clock = ManualClock()
    contexts = ServerContexts(settings, clock)
    first = _serial(contexts.current(), ca)
    assert settings.keystore is not None
    staged = tmp_path / "next.p12"
    write_pkcs12_keystore(ca.issue_cert("localhost", "127.0.0.1"), staged)
    staged.replace(settings.keystore)  # as cert-manager's keystores.pkcs12 output is swapped
    _later(clock)
    assert _serial(contexts.current(), ca) != first and contexts.reloads == 1


def test_a_context_is_usable_by_pythons_ssl(tmp_path: Path) -> None:
    context = build_context(_pkcs12_settings(trustme.CA(), tmp_path))
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
