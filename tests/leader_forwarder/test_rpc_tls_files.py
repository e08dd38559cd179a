"""The mutual-TLS files are checked when a node starts: a keystore and truststore that
cannot serve are refused naming the file and why, not found out later as failed
handshakes; a rotated pair that does not load leaves the previous one in use."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trustme

from zonegate.broker.rpc_tls_settings import open_rpc_tls
from zonegate.broker.startup import StartupError
from zonegate.leader_forwarder.rpc_tls import RpcTls, RpcTlsError, RpcTlsFiles, load_identity

pytestmark = pytest.mark.unit


def write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def files(tmp: Path, ca: trustme.CA, keystore: bytes | None = None) -> RpcTlsFiles:
    if keystore is None:
        keystore = ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.bytes()
    return RpcTlsFiles(write(tmp, "node.pem", keystore), write(tmp, "ca.pem", ca.cert_pem.bytes()))


def test_a_certificate_of_the_cluster_ca_loads(tmp_path: Path, ca: trustme.CA) -> None:
    identity = load_identity(files(tmp_path, ca))
    assert identity.key.startswith(b"-----BEGIN") and b"PRIVATE KEY" in identity.key
    assert identity.chain.count(b"BEGIN CERTIFICATE") == 1
    assert identity.ca.strip() == ca.cert_pem.bytes().strip()


def test_a_certificate_of_another_ca_is_refused(tmp_path: Path, ca: trustme.CA) -> None:
    other = trustme.CA().issue_cert("127.0.0.1").private_key_and_cert_chain_pem.bytes()
    with pytest.raises(RpcTlsError, match=r"node\.pem: its certificate is not signed by the CA"):
        load_identity(files(tmp_path, ca, other))


def test_keystores_that_cannot_serve_are_refused(tmp_path: Path, ca: trustme.CA) -> None:
    a, b = ca.issue_cert("127.0.0.1"), ca.issue_cert("127.0.0.1")
    cases = {
        "only a certificate": (a.cert_chain_pems[0].bytes(), "found 0 keys and 1 certificates"),
        "the key of another certificate": (
            b.private_key_pem.bytes() + a.cert_chain_pems[0].bytes(),
            "the key and certificate do not load",
        ),
        "an encrypted key": (
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
            + a.cert_chain_pems[0].bytes(),
            "the private key is encrypted",
        ),
    }
    for keystore, message in cases.values():
        with pytest.raises(RpcTlsError, match=message):
            load_identity(files(tmp_path, ca, keystore))


def test_missing_files_and_half_configurations_are_startup_errors(
    tmp_path: Path, ca: trustme.CA
) -> None:
    f = files(tmp_path, ca)
    assert open_rpc_tls(None, None, None) is None
    with pytest.raises(StartupError, match="keystore.location is set without .*truststore"):
        open_rpc_tls(f.keystore, None, None)
    with pytest.raises(StartupError, match="truststore.location is set without .*keystore"):
        open_rpc_tls(None, f.truststore, None)
    with pytest.raises(StartupError, match="server.name is set without mutual TLS"):
        open_rpc_tls(None, None, "zonegate-rpc")
    with pytest.raises(StartupError, match=r"RPC truststore .*nope\.pem: no such file"):
        open_rpc_tls(f.keystore, tmp_path / "nope.pem", None)
    tls = open_rpc_tls(f.keystore, f.truststore, "zonegate-rpc")
    assert tls is not None
    assert tls.channel_options() == [("grpc.ssl_target_name_override", "zonegate-rpc")]


def test_a_rotated_pair_that_does_not_load_keeps_the_previous(
    tmp_path: Path, ca: trustme.CA, caplog: pytest.LogCaptureFixture
) -> None:
    f = files(tmp_path, ca)
    tls = RpcTls(f)
    f.keystore.write_bytes(b"half a file")
    with caplog.at_level(logging.WARNING):
        assert tls.reload() == 0
    assert "previous ones kept" in caplog.text and "node.pem" in caplog.text
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(f.keystore))
    assert tls.reload() == 1
    assert tls.reload() == 1, "unchanged files are not read again"
