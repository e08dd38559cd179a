"""proxy/tls.py without sockets: contexts from PEM files (and what is refused), a server
TlsSession handshaking with a client SSLObject over memory BIOs, the client
certificate's subject as Java prints it, and certificate files re-read when they change
(by the node's clock, ManualClock here)."""

from __future__ import annotations

import asyncio
import ssl
import threading
from pathlib import Path

import pytest
import trustme

from zonegate.proxy import tls
from zonegate.proxy.tls import (
    RELOAD_CHECK_S,
    ServerContexts,
    TlsError,
    TlsSession,
    TlsSettings,
    TlsSettingsError,
    build_context,
    openssl_cipher_name,
)
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def _server_files(ca: trustme.CA, tmp_path: Path, name: str = "server") -> TlsSettings:
    cert = ca.issue_cert("localhost", "127.0.0.1")
    keystore = tmp_path / f"{name}.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    truststore = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(truststore))
    return TlsSettings(keystore=keystore, truststore=truststore)


def _client(ca: trustme.CA, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    if cert is not None:
        cert.configure_cert(context)
    return context


def _handshake(
    server: TlsSession, client_context: ssl.SSLContext
) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
    """Drives both ends over memory until the handshake is done."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    for _ in range(10):
        try:
            client.do_handshake()
        except ssl.SSLWantReadError:
            pass
        _, answer = server.receive(outgoing.read())
        incoming.write(answer)
        if server.handshake_done:
            try:
                client.do_handshake()
                break
            except ssl.SSLWantReadError:
                continue
    assert server.handshake_done
    return client, incoming, outgoing


def test_a_session_handshakes_and_moves_bytes_both_ways(ca: trustme.CA, tmp_path: Path) -> None:
    settings = _server_files(ca, tmp_path)
    server = TlsSession(build_context(settings))
    client, incoming, outgoing = _handshake(server, _client(ca))
    client.write(b"\x00\x00\x00\x04ping")
    app, _ = server.receive(outgoing.read())
    assert app == b"\x00\x00\x00\x04ping"
    incoming.write(server.send(b"pong" * 10000))
    got = b""
    while len(got) < 40000:
        got += client.read(65536)
    assert got == b"pong" * 10000
    assert server.peer_dn() is None  # ssl.client.auth=none: no client certificate


@pytest.mark.parametrize("scratch", [None, 5000])
def test_a_megabyte_in_uneven_pieces_comes_out_whole(
    ca: trustme.CA, tmp_path: Path, scratch: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records split across receives, several records per receive, then close_notify in
    the same receive as the last data. scratch=5000: the scratch buffer holds less than
    a receive's records, so it is filled and emptied several times per receive."""
    if scratch is not None:
        monkeypatch.setattr(tls, "_SCRATCH_KEEP", scratch)
        monkeypatch.setattr(tls, "_scratch_local", threading.local())
    server = TlsSession(build_context(_server_files(ca, tmp_path)))
    client, _, outgoing = _handshake(server, _client(ca))
    sent = bytes(range(256)) * 4096
    client.write(sent)
    wire = outgoing.read()
    got = bytearray()
    pieces = [7, 20_000, 1, 100_000, 16_405, 300_000]
    start = 0
    for size in pieces:
        app, _ = server.receive(wire[start : start + size])
        got += app
        start += size
    try:
        client.unwrap()
    except ssl.SSLWantReadError:
        pass
    app, answer = server.receive(wire[start:] + outgoing.read())
    got += app
    assert bytes(got) == sent
    assert server.peer_closed and answer  # our close_notify answers theirs


def test_the_client_certificate_subject_is_rfc2253_as_java_prints_it(
    ca: trustme.CA, tmp_path: Path
) -> None:
    settings = _server_files(ca, tmp_path)
    context = build_context(
        TlsSettings(settings.keystore, truststore=settings.truststore, client_auth="required")
    )
    client_cert = ca.issue_cert(
        "alice@example.com", common_name="alice", organization_name="Acme, Inc."
    )
    server = TlsSession(context)
    _handshake(server, _client(ca, client_cert))
    dn = server.peer_dn()
    assert dn is not None
    assert dn.startswith("CN=alice,OU="), dn
    assert "O=Acme\\, Inc." in dn


def test_required_client_auth_refuses_a_client_without_certificate(
    ca: trustme.CA, tmp_path: Path
) -> None:
    settings = _server_files(ca, tmp_path)
    context = build_context(
        TlsSettings(settings.keystore, truststore=settings.truststore, client_auth="required")
    )
    with pytest.raises(TlsError):
        _handshake(TlsSession(context), _client(ca))


def test_plaintext_and_garbage_are_told_apart_from_tls(ca: trustme.CA, tmp_path: Path) -> None:
    context = build_context(_server_files(ca, tmp_path))
    with pytest.raises(TlsError, match="plaintext Kafka request"):
        TlsSession(context).receive(b"\x00\x00\x00\x15\x00\x12\x00\x03")
    with pytest.raises(TlsError, match="not a TLS handshake"):
        TlsSession(context).receive(b"GET / HTTP/1.1\r\n")
    with pytest.raises(TlsError, match="TLS failed"):
        TlsSession(context).receive(b"\x16\x03\x01\x00\x05hello")


def test_what_cannot_be_loaded_is_refused_by_name(ca: trustme.CA, tmp_path: Path) -> None:
    settings = _server_files(ca, tmp_path)
    with pytest.raises(TlsSettingsError, match="ssl.keystore.location .* no such file"):
        build_context(TlsSettings(tmp_path / "missing.pem"))
    only_cert = tmp_path / "cert-only.pem"
    ca.issue_cert("localhost").cert_chain_pems[0].write_to_path(str(only_cert))
    with pytest.raises(TlsSettingsError, match="ssl.keystore.location"):
        build_context(TlsSettings(only_cert))
    with pytest.raises(TlsSettingsError, match="needs ssl.truststore.location"):
        build_context(TlsSettings(settings.keystore, client_auth="required"))
    with pytest.raises(TlsSettingsError, match="ssl.enabled.protocols"):
        build_context(TlsSettings(settings.keystore, protocols=("TLSv1.1",)))
    with pytest.raises(TlsSettingsError, match="ssl.cipher.suites: unknown"):
        build_context(TlsSettings(settings.keystore, cipher_suites=("TLS_NOPE_WITH_NOTHING",)))
    with pytest.raises(TlsSettingsError, match="TLS 1.3's suites"):
        build_context(TlsSettings(settings.keystore, cipher_suites=("TLS_AES_128_GCM_SHA256",)))


def test_protocols_and_cipher_suites_are_honoured(ca: trustme.CA, tmp_path: Path) -> None:
    settings = _server_files(ca, tmp_path)
    only12 = build_context(
        TlsSettings(
            settings.keystore,
            cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",),
        )
    )
    assert only12.maximum_version == ssl.TLSVersion.TLSv1_2  # no TLS 1.3 suite listed
    server = TlsSession(only12)
    client, _, _ = _handshake(server, _client(ca))
    assert server.version() == "TLSv1.2"
    assert client.cipher() is not None and client.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    only13 = build_context(TlsSettings(settings.keystore, protocols=("TLSv1.3",)))
    server = TlsSession(only13)
    _handshake(server, _client(ca))
    assert server.version() == "TLSv1.3"


def test_java_suite_names_become_openssl_names() -> None:
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == (
        "ECDHE-RSA-AES128-GCM-SHA256"
    )
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == (
        "ECDHE-ECDSA-CHACHA20-POLY1305"
    )
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256") == (
        "ECDHE-RSA-AES128-SHA256"
    )
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"
    assert openssl_cipher_name("ECDHE-RSA-AES128-GCM-SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"


def _serial(context: ssl.SSLContext, ca: trustme.CA) -> int:
    server = TlsSession(context)
    client, _, _ = _handshake(server, _client(ca))
    der = client.getpeercert(binary_form=True)
    assert der is not None
    from cryptography import x509

    return x509.load_der_x509_certificate(der).serial_number


def _later(clock: ManualClock) -> None:
    asyncio.run(clock.advance(RELOAD_CHECK_S))  # nobody sleeps on it: time moves, at once


def test_rotated_files_are_read_again_at_the_next_check(ca: trustme.CA, tmp_path: Path) -> None:
    settings = _server_files(ca, tmp_path)
    clock = ManualClock()
    contexts = ServerContexts(settings, clock)
    first = _serial(contexts.current(), ca)
    # cert-manager writes the new pair in place of the old.
    rotated = tmp_path / "next.pem"
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(rotated))
    rotated.replace(settings.keystore)
    assert _serial(contexts.current(), ca) == first, "not looked at before a second passed"
    _later(clock)
    second = _serial(contexts.current(), ca)
    assert second != first and contexts.reloads == 1
    # A half-written file keeps the last good certificate, and is tried again later.
    settings.keystore.write_text("-----BEGIN PRIVATE KEY-----\n")
    _later(clock)
    assert _serial(contexts.current(), ca) == second
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(rotated))
    rotated.replace(settings.keystore)
    _later(clock)
    assert _serial(contexts.current(), ca) not in (first, second)
    assert contexts.reloads == 2
