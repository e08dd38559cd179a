"""A listener's keystore and truststore in the forms Kafka reads, loaded into an
`ssl.SSLContext`: PEM files, PKCS12 files (read with `cryptography`), and inline
PEM (`ssl.keystore.key` with `ssl.keystore.certificate.chain`,
`ssl.truststore.certificates`), as Kafka's DefaultSslEngineFactory takes them.

Python's `ssl` loads a key and its chain only from a file: material that is not
a PEM file already (a PKCS12 store, inline PEM) is written as PEM, its key
encrypted with a one-time password, to a file in memory (memfd on Linux; else a
private temporary file, removed at once), loaded, and closed, so the clear key
never touches a disk. JKS, Kafka's default type, is
refused by name (broker/listeners.py): no well-kept Python library reads it.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import ssl
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

if TYPE_CHECKING:
    from zonegate.proxy.tls import TlsSettings

PEM, PKCS12 = "PEM", "PKCS12"
# A PEM block as Kafka's PemParser finds it: whitespace anywhere in the base64 (a
# value joined from continuation lines of a properties file is one line) and
# encapsulated headers ("Proc-Type: ...") skipped.
_BLOCK = re.compile(
    r"-+BEGIN\s+([A-Z0-9 ]+?)\s*-+\s*((?:[^\r\n:-]*:[^\r\n]*[\r\n]+)*)([A-Za-z0-9/+=\s]*?)"
    r"\s*-+END\s+\1\s*-+"
)


class KeystoreError(ValueError):
    """A keystore or truststore that cannot be used; the message names the setting."""


def pem_blocks(text: str) -> list[tuple[str, bytes]]:
    """(label, DER) of each PEM block in `text`, however its lines were joined."""
    found = []
    for m in _BLOCK.finditer(text):
        if m.group(2).strip():
            # RFC 1421 headers: an old-style encrypted key, which Kafka does not read
            raise KeystoreError(f"a PEM {m.group(1)} with headers (use PKCS#8)")
        found.append((m.group(1), base64.b64decode(re.sub(r"\s", "", m.group(3)))))
    return found


def _pem(label: str, der: bytes) -> bytes:
    body = base64.encodebytes(der).replace(b"\n", b"")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return b"\n".join(
        [f"-----BEGIN {label}-----".encode(), *lines, f"-----END {label}-----".encode(), b""]
    )


def _certificates_pem(text: str, key: str) -> bytes:
    certs = [_pem(label, der) for label, der in pem_blocks(text) if label == "CERTIFICATE"]
    if not certs:
        raise KeystoreError(f"{key}: no PEM certificate in it")
    return b"".join(certs)


def _load_chain_from_memory(
    context: ssl.SSLContext, key: PrivateKeyTypes, chain_pem: bytes
) -> None:
    """Loads a key and its chain through a private temporary file that holds the key
    encrypted with a one-time password (ssl reads keys from files only)."""
    password = secrets.token_hex(16)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode()),
    )
    data = key_pem + chain_pem
    if hasattr(os, "memfd_create"):
        # Linux: a file only in memory, so a read-only root filesystem (the DaemonSet's)
        # needs no writable temporary directory.
        fd = os.memfd_create("zonegate-keystore", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            context.load_cert_chain(f"/proc/self/fd/{fd}", password=password)
        finally:
            os.close(fd)
        return
    fd, name = tempfile.mkstemp(prefix="zonegate-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        context.load_cert_chain(name, password=password)
    finally:
        os.unlink(name)


def _read(path: Path, key: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise KeystoreError(f"{key} {str(path)!r}: no such file") from None
    except OSError as exc:
        raise KeystoreError(f"{key} {str(path)!r}: {exc.strerror or exc}") from None


def _pkcs12(path: Path, password: str | None, key: str) -> pkcs12.PKCS12KeyAndCertificates:
    data = _read(path, key)
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError:
        what = (
            "ssl.keystore.password" if key == "ssl.keystore.location" else "ssl.truststore.password"
        )
        raise KeystoreError(
            f"{key} {str(path)!r}: not a PKCS12 store this password opens (a wrong {what}?)"
        ) from None


def load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    """The listener's private key and certificate chain, from whichever form is set."""
    if settings.keystore_key is not None:
        chain = _certificates_pem(
            settings.keystore_certificate_chain or "", "ssl.keystore.certificate.chain"
        )
        keys = [(label, der) for label, der in pem_blocks(settings.keystore_key) if "KEY" in label]
        if len(keys) != 1:
            raise KeystoreError(
                f"ssl.keystore.key: expected one PEM private key, found {len(keys)}"
            )
        label, der = keys[0]
        password = settings.key_password.encode() if settings.key_password else None
        try:
            private = serialization.load_pem_private_key(_pem(label, der), password)
        except (ValueError, TypeError) as exc:
            raise KeystoreError(
                f"ssl.keystore.key: the private key cannot be read ({exc}; a wrong "
                "ssl.key.password?)"
            ) from None
        _load(context, private, chain, "ssl.keystore.key")
        return
    assert settings.keystore is not None
    if settings.keystore_type == PKCS12:
        store = _pkcs12(settings.keystore, settings.keystore_password, "ssl.keystore.location")
        if store.key is None or store.cert is None:
            raise KeystoreError(
                f"ssl.keystore.location {str(settings.keystore)!r}: no private key with its "
                "certificate in this PKCS12 store"
            )
        chain = b"".join(
            c.certificate.public_bytes(serialization.Encoding.PEM)
            for c in (store.cert, *store.additional_certs)
        )
        _load(context, store.key, chain, "ssl.keystore.location")
        return
    try:
        context.load_cert_chain(settings.keystore, password=settings.key_password)
    except FileNotFoundError:
        raise KeystoreError(
            f"ssl.keystore.location {str(settings.keystore)!r}: no such file"
        ) from None
    except ssl.SSLError as exc:
        raise KeystoreError(
            f"ssl.keystore.location {str(settings.keystore)!r}: not a PEM private key and "
            f"certificate chain it can use ({exc.reason or exc}; a wrong ssl.key.password?)"
        ) from None


def _load(context: ssl.SSLContext, key: PrivateKeyTypes, chain: bytes, setting: str) -> None:
    try:
        _load_chain_from_memory(context, key, chain)
    except ssl.SSLError as exc:
        raise KeystoreError(
            f"{setting}: the key and certificate chain cannot be used together "
            f"({exc.reason or exc})"
        ) from None


def load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    """The CAs client certificates are checked against; False when none is set."""
    if settings.truststore_certificates is not None:
        pem = _certificates_pem(settings.truststore_certificates, "ssl.truststore.certificates")
        context.load_verify_locations(cadata=pem.decode())
        return True
    if settings.truststore is None:
        return False
    if settings.truststore_type == PKCS12:
        store = _pkcs12(
            settings.truststore, settings.truststore_password, "ssl.truststore.location"
        )
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.insert(0, store.cert.certificate)
        if not certs:
            raise KeystoreError(
                f"ssl.truststore.location {str(settings.truststore)!r}: no certificate in "
                "this PKCS12 store"
            )
        context.load_verify_locations(cadata=b"".join(_as_der(c) for c in certs))
        return True
    try:
        context.load_verify_locations(cafile=settings.truststore)
    except FileNotFoundError:
        raise KeystoreError(
            f"ssl.truststore.location {str(settings.truststore)!r}: no such file"
        ) from None
    except ssl.SSLError as exc:
        raise KeystoreError(
            f"ssl.truststore.location {str(settings.truststore)!r}: no PEM certificate "
            f"in it ({exc.reason or exc})"
        ) from None
    return True


def _as_der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)
