"""TLS on a Kafka listener, without I/O: contexts from Kafka's ssl.* settings (the stores
read by proxy/keystores.py: PEM, PKCS12, inline PEM), re-read when their files
change, and one `TlsSession` per connection (bytes in, bytes out).

The listener's asyncio protocol feeds the socket's bytes to `TlsSession.handshake`,
then to `feed`, and writes what they return; its frames are decrypted by
proxy/tls_frames.py through `fill`. The session owns an `ssl.SSLObject` over two
memory BIOs, as asyncio's own TLS transport does, so the protocol sees when a
handshake starts and ends, can time it out and say why it failed, and picks the
context of each connection when it opens: after a certificate rotation (cert-manager rewriting the
files) new connections get the new certificate and the open ones keep theirs.

`TlsSession.peer_dn` is the client certificate's subject as Java's
`X500Principal.getName()` (RFC 2253) prints it, the form `ssl.principal.mapping.rules`
match against (proxy/auth's `distinguished_name`).
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from zonegate.proxy.auth import distinguished_name
from zonegate.proxy.keystores import KeystoreError, load_keystore, load_truststore
from zonegate.runtime.clock import Clock

log = logging.getLogger(__name__)

PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
# TLS 1.3's suites, which OpenSSL enables whatever the cipher list says.
TLS13_SUITES = ("TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256")
# Room for the plaintext of one TLS record (16 KiB) that OpenSSL may hold besides what
# is waiting in the incoming BIO, plus a margin.
_RECORD_ROOM = 16 * 1024 + 1024
# A thread's scratch buffer for decrypted records is kept up to this size (a receive is
# at most the event loop's read size, 256 KiB, plus what OpenSSL held back).
_SCRATCH_KEEP = 1024 * 1024
_scratch_local = threading.local()
# How often the certificate files' metadata is looked at, at most.
RELOAD_CHECK_S = 1.0


def _scratch(size: int) -> bytearray:
    """A buffer of at least `size` bytes (capped at _SCRATCH_KEEP), reused by the
    thread's TLS sessions: its contents are copied out before receive returns, so one
    per thread serves every connection, and it is neither allocated nor zeroed again."""
    size = min(size, _SCRATCH_KEEP)
    buf: bytearray | None = getattr(_scratch_local, "buf", None)
    if buf is None or len(buf) < size:
        buf = bytearray(size)
        _scratch_local.buf = buf
    return buf


class TlsSettingsError(ValueError):
    """A TLS setting that cannot be honoured; the message names it."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """One listener's ssl.* settings (Kafka's names); proxy/keystores.py reads the stores."""

    keystore: Path | None  # ssl.keystore.location: the private key and its certificate chain
    key_password: str | None = None  # ssl.key.password: of an encrypted private key
    truststore: Path | None = None  # ssl.truststore.location: the CAs of client certificates
    client_auth: str = "none"  # ssl.client.auth
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")  # ssl.enabled.protocols
    cipher_suites: tuple[str, ...] = ()  # ssl.cipher.suites; empty: OpenSSL's defaults
    keystore_type: str = "PEM"  # ssl.keystore.type: PEM or PKCS12
    keystore_password: str | None = None  # ssl.keystore.password (PKCS12)
    keystore_key: str | None = None  # ssl.keystore.key: inline PEM, with the chain below
    keystore_certificate_chain: str | None = None  # ssl.keystore.certificate.chain
    truststore_type: str = "PEM"  # ssl.truststore.type: PEM or PKCS12
    truststore_password: str | None = None  # ssl.truststore.password (PKCS12)
    truststore_certificates: str | None = None  # ssl.truststore.certificates: inline PEM


def openssl_cipher_name(iana: str) -> str:
    """Java's (IANA) suite name as OpenSSL names it: TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
    -> ECDHE-RSA-AES256-GCM-SHA384."""
    kx, sep, rest = iana.removeprefix("TLS_").partition("_WITH_")
    if not sep:
        return iana  # already OpenSSL's name
    parts = rest.split("_")
    if parts[0] == "AES" and len(parts) > 1:  # AES_256_GCM -> AES256-GCM
        parts = [parts[0] + parts[1], *parts[2:]]
    parts = [p for p in parts if p != "CBC"]  # OpenSSL names CBC suites by their hash
    if parts[:2] == ["CHACHA20", "POLY1305"]:  # and CHACHA20's without it
        parts = ["CHACHA20", "POLY1305"]
    prefix = [] if kx == "RSA" else kx.split("_")
    return "-".join([*prefix, *parts])


def _ciphers(context: ssl.SSLContext, suites: Sequence[str]) -> None:
    """Restricts the suites to `suites` (Java's or OpenSSL's names), or refuses by name."""
    tls12 = [s for s in suites if s not in TLS13_SUITES]
    tls13 = [s for s in suites if s in TLS13_SUITES]
    if tls13 and set(tls13) != set(TLS13_SUITES):
        raise TlsSettingsError(
            f"ssl.cipher.suites: TLS 1.3's suites cannot be chosen one by one here; list all "
            f"of {', '.join(TLS13_SUITES)} or none (then TLS 1.3 is off), got {', '.join(tls13)}"
        )
    if not tls13:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if not tls12:
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    known = {c["name"] for c in context.get_ciphers()}
    names = [openssl_cipher_name(s) for s in tls12]
    unknown = [s for s, n in zip(tls12, names, strict=True) if n not in known]
    if unknown:
        raise TlsSettingsError(f"ssl.cipher.suites: unknown or unavailable: {', '.join(unknown)}")
    context.set_ciphers(":".join(names))


def build_context(settings: TlsSettings) -> ssl.SSLContext:
    """A server context from the files as they are now; TlsSettingsError names what is
    wrong (a missing file, a key that does not match, a wrong password)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    unknown = [p for p in settings.protocols if p not in PROTOCOLS]
    if unknown or not settings.protocols:
        raise TlsSettingsError(
            f"ssl.enabled.protocols: only TLSv1.2 and TLSv1.3 are offered, got "
            f"{', '.join(settings.protocols) or 'none'}"
        )
    versions = sorted(PROTOCOLS[p] for p in settings.protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if settings.cipher_suites:
        _ciphers(context, settings.cipher_suites)
    if settings.client_auth not in CLIENT_AUTH:
        raise TlsSettingsError(
            f"ssl.client.auth: expected none, requested or required, got {settings.client_auth!r}"
        )
    try:
        load_keystore(context, settings)
        trusted = load_truststore(context, settings)
    except KeystoreError as exc:
        raise TlsSettingsError(str(exc)) from None
    if not trusted and settings.client_auth != "none":
        raise TlsSettingsError(
            f"ssl.client.auth={settings.client_auth} needs ssl.truststore.location (the CAs "
            "client certificates are checked against)"
        )
    context.verify_mode = CLIENT_AUTH[settings.client_auth]
    return context


def _stamp(path: Path | None) -> tuple[int, int, int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0, 0)
    return (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_size)


class ServerContexts:
    """The listener's current context; the files are looked at (stat only) at most once a
    second, when a connection opens, and a context is built again when one changed.

    cert-manager replaces a Secret's files through a symlink swap (a new inode) and a
    plain copy changes the mtime: either is seen. A half-written pair (the key of the new
    certificate not there yet) fails to load: the old context stays, and it is tried
    again at the next check; one WARNING per change seen.
    """

    def __init__(self, settings: TlsSettings, clock: Clock) -> None:
        self.settings = settings
        self._clock = clock
        self._stamps = self._look()
        self._context = build_context(settings)
        self._next_check = clock.monotonic() + RELOAD_CHECK_S
        self._failed_stamps: object = None
        self.reloads = 0

    def _look(self) -> tuple[object, ...]:
        return (_stamp(self.settings.keystore), _stamp(self.settings.truststore))

    def current(self) -> ssl.SSLContext:
        now = self._clock.monotonic()
        if now >= self._next_check:
            self._next_check = now + RELOAD_CHECK_S
            stamps = self._look()
            if stamps != self._stamps:
                self._reload(stamps)
        return self._context

    def _reload(self, stamps: tuple[object, ...]) -> None:
        try:
            context = build_context(self.settings)
        except TlsSettingsError as exc:
            if stamps != self._failed_stamps:
                self._failed_stamps = stamps
                log.warning(
                    "certificate files changed but cannot be loaded (kept the previous ones): %s",
                    exc,
                )
            return
        self._context, self._stamps = context, stamps
        self.reloads += 1
        log.info("certificate files re-read: new connections get the new certificate")


class TlsError(Exception):
    """The peer broke TLS (or spoke something else); `reason` says what for the log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def plaintext_kafka(first: bytes | memoryview) -> bool:
    """Whether bytes that should open a TLS handshake look like a Kafka request instead:
    a TLS record starts with 0x16 (handshake) then version 3.x; a Kafka request with a
    4-byte big-endian size, whose first byte is 0 for any size under 16 MiB."""
    return len(first) >= 1 and first[0] == 0


class TlsSession:
    """One connection's TLS, sans-IO: `handshake(bytes)` -> bytes to send; then
    `feed(bytes)` and `fill(buffer)` -> application bytes decrypted into it, `outgoing()`
    -> what TLS itself sends; `send(bytes)` -> bytes to send. `receive(bytes)` ->
    (application bytes, bytes to send) does it all at once, for tests and tools.
    TlsError when the peer breaks TLS."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.handshake_done = False
        self._seen_bytes = False
        self.peer_closed = False  # the client sent close_notify: it is done

    def receive(self, data: bytes) -> tuple[bytes, bytes]:
        """The handshake, then every application byte of the records received so far."""
        out = self.handshake(data)
        if not self.handshake_done or self.peer_closed:
            return b"", out
        try:
            app = self._decrypt()
        except ssl.SSLZeroReturnError:
            self._answer_close()
            app = b""
        except ssl.SSLError as exc:
            raise TlsError(f"TLS failed: {exc.reason or exc}") from None
        return app, out + self._outgoing.read()

    def handshake(self, data: bytes | memoryview) -> bytes:
        """Takes `data` and moves the handshake on; the bytes to send. Application records
        that came with the handshake's last flight stay in the session for `read_into`."""
        if not self._seen_bytes and data:
            self._seen_bytes = True
            if plaintext_kafka(data):
                raise TlsError("a plaintext Kafka request on a TLS listener")
            if data[0] != 0x16:
                raise TlsError(f"not a TLS handshake (first byte 0x{data[0]:02x})")
        self._incoming.write(data)
        if not self.handshake_done:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                self._answer_close()
            except ssl.SSLError as exc:
                raise TlsError(f"TLS failed: {exc.reason or exc}") from None
            else:
                self.handshake_done = True
        return self._outgoing.read()

    def feed(self, data: bytes | memoryview) -> None:
        """Records received after the handshake, decrypted later by `fill`."""
        self._incoming.write(data)

    def fill(self, view: memoryview) -> int:
        """Decrypts into `view` until it is full or no whole record is left: the count.
        Once the client has closed its side (close_notify, answered: see `outgoing`),
        `peer_closed` is set and nothing more comes. TlsError when the records are not
        valid. OpenSSL gives at most one record per read, and some clients send a record
        per message (librdkafka: one per payload it does not copy, 1 KiB in the
        benchmark), so this loop runs per record: kept to the read call itself."""
        if self.peer_closed:
            return 0
        read = self._obj.read
        size = len(view)
        n = 0
        try:
            while n < size:
                # With a buffer, read returns the count (typeshed says bytes).
                got: int = read(size - n, view[n:])  # type: ignore[assignment]
                if not got:  # close_notify from the peer: keep what came before it
                    self._answer_close()
                    break
                n += got
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:  # close_notify, said the other way
            self._answer_close()
        except ssl.SSLError as exc:
            raise TlsError(f"TLS failed: {exc.reason or exc}") from None
        return n

    def outgoing(self) -> bytes:
        """What TLS itself has to send: a close_notify answering the client's, session
        tickets, a TLS 1.3 KeyUpdate answer."""
        return self._outgoing.read()

    def _decrypt(self) -> bytes:
        """All the application data the records received so far hold.

        OpenSSL gives one record (16 KiB at most) per read, so a 1 MiB produce request
        takes 64 reads. `read(n)` would make a bytes object of n for each record, then
        shrink it: while glibc maps blocks that large (until a large free raises its
        threshold) each costs an mmap, page faults, an mremap and a munmap, 3x the
        decryption. The records go instead into the thread's scratch buffer (sized for
        the ciphertext waiting plus a record OpenSSL may hold), neither allocated nor
        zeroed per receive, and come out in one bytes copy.
        """
        buf = _scratch(self._incoming.pending + self._obj.pending() + _RECORD_ROOM)
        parts: list[bytes] = []
        n = 0
        with memoryview(buf) as view:
            while True:
                if n == len(buf):  # OpenSSL held more than the estimate: keep reading
                    parts.append(bytes(view))
                    n = 0
                try:
                    # With a buffer, read returns the count (typeshed says bytes).
                    got = cast(int, self._obj.read(len(buf) - n, view[n:]))
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:  # close_notify, said the other way
                    got = 0
                if not got:  # close_notify from the peer: keep what came before it
                    self._answer_close()
                    break
                n += got
            if n or not parts:
                parts.append(bytes(view[:n]))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _answer_close(self) -> None:
        """The client's close_notify is answered with ours, as TLS asks: clients wait
        for it (aiokafka 30 s on every close)."""
        self.peer_closed = True
        try:
            self._obj.unwrap()
        except (ssl.SSLWantReadError, ssl.SSLError):
            pass

    def send(self, data: bytes) -> bytes:
        view = memoryview(data)
        while view:
            n = self._obj.write(view)
            view = view[n:]
        return self._outgoing.read()

    def version(self) -> str | None:
        return self._obj.version()

    def peer_dn(self) -> str | None:
        """The verified client certificate's subject as Java's X500Principal.getName()
        prints it (RFC 2253), or None when the client sent none."""
        der = self._obj.getpeercert(binary_form=True)
        return distinguished_name(der) if der else None
