"""Mutual TLS on the leader RPC: this node's identity (its private key and certificate chain,
one PEM file as Kafka's `ssl.keystore.type=PEM`) and the cluster's CA (a PEM file), made
into gRPC credentials for the leader server and for every channel to a peer, and re-read
when their files change (docs/internode-tls.md).

The server asks every caller for a certificate and refuses one the cluster's CA did not
sign (gRPC's `require_client_authentication`); a channel presents this node's certificate
and checks the peer's against the same CA and the address it dials (or the one name every
node's certificate carries, `server_name`). The files are checked when the node starts,
with the ssl module, so a wrong file is refused then with a message naming it, not later
as a failed handshake; a rotated pair that does not load is refused the same way, with a
WARNING, and the previous pair kept.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

log = logging.getLogger(__name__)

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?-----END \1-----\r?\n?", re.DOTALL)
# How often a channel's user looks at the files' modification times at most.
_CHECK_EVERY_S = 1.0


class RpcTlsError(ValueError):
    """A keystore or truststore that cannot serve: the message names the file and why."""


@dataclass(frozen=True)
class RpcTlsFiles:
    keystore: Path  # PEM: the private key (unencrypted) and its certificate chain
    truststore: Path  # PEM: the cluster's CA certificate(s)
    # The name every node's certificate carries, checked instead of the address dialled
    # (gRPC's ssl_target_name_override); None: the address, as an IP or DNS SAN.
    server_name: str | None = None


@dataclass(frozen=True)
class Identity:
    """This node's key and certificate chain, and the CA it trusts, as PEM bytes."""

    key: bytes
    chain: bytes
    ca: bytes


def load_identity(files: RpcTlsFiles) -> Identity:
    """Reads and checks the two files: the key matches the first certificate, and the
    chain is signed by the truststore's CA. RpcTlsError says which file and why."""
    keystore, truststore = _read(files.keystore, "keystore"), _read(files.truststore, "truststore")
    keys, certs = [], []
    for m in _PEM_BLOCK.finditer(keystore):
        kind = m.group(1).decode()
        if kind == "ENCRYPTED PRIVATE KEY":
            raise RpcTlsError(
                f"RPC keystore {files.keystore}: the private key is encrypted; the leader RPC "
                "takes an unencrypted PEM key (a Kubernetes Secret protects the file)"
            )
        if kind.endswith("PRIVATE KEY"):
            keys.append(m.group(0))
        elif kind == "CERTIFICATE":
            certs.append(m.group(0))
    if len(keys) != 1 or not certs:
        raise RpcTlsError(
            f"RPC keystore {files.keystore}: expected one PEM private key and its certificate "
            f"chain, found {len(keys)} keys and {len(certs)} certificates"
        )
    cas = [m.group(0) for m in _PEM_BLOCK.finditer(truststore) if m.group(1) == b"CERTIFICATE"]
    if not cas:
        raise RpcTlsError(f"RPC truststore {files.truststore}: no PEM certificate in it")
    chain = b"".join(c if c.endswith(b"\n") else c + b"\n" for c in certs)
    identity = Identity(keys[0], chain, b"\n".join(cas))
    _check_signed(identity, files)
    return identity


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RpcTlsError(f"RPC {what} {path}: {(exc.strerror or str(exc)).lower()}") from None


def _check_signed(identity: Identity, files: RpcTlsFiles) -> None:
    """One TLS handshake in memory, this node's certificate against the CA: what every
    peer will check of it, so a certificate of another CA is refused at start."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # load_cert_chain takes only files; the keystore is one, holding key and chain.
        server.load_cert_chain(files.keystore)
    except ssl.SSLError as exc:
        raise RpcTlsError(
            f"RPC keystore {files.keystore}: the key and certificate do not load: "
            f"{exc.reason or exc}"
        ) from None
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False  # the name is the dialling peer's to check, not ours
    try:
        client.load_verify_locations(cadata=identity.ca.decode())
    except (ssl.SSLError, UnicodeDecodeError) as exc:
        raise RpcTlsError(f"RPC truststore {files.truststore}: not a PEM CA: {exc}") from None
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_side=False)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    for _ in range(10):
        for i, side, out, into in ((0, c, c_out, s_in), (1, s, s_out, c_in)):
            if not done[i]:
                try:
                    side.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLCertVerificationError as exc:
                    raise RpcTlsError(
                        f"RPC keystore {files.keystore}: its certificate is not signed by "
                        f"the CA of the RPC truststore {files.truststore} "
                        f"({exc.verify_message}): every peer would refuse this node"
                    ) from None
                except ssl.SSLError as exc:
                    raise RpcTlsError(
                        f"RPC keystore {files.keystore}: its certificate cannot serve TLS "
                        f"with the truststore {files.truststore}: {exc.reason or exc}"
                    ) from None
            into.write(out.read())
        if all(done):
            return
    raise RpcTlsError(f"RPC keystore {files.keystore}: the TLS check did not complete")


def _stamp(files: RpcTlsFiles) -> tuple[float, ...]:
    """What says a file changed: modification times and sizes (a Kubernetes Secret's
    files are symbolic links swapped at once, which stat follows)."""
    out: list[float] = []
    for p in (files.keystore, files.truststore):
        try:
            st = os.stat(p)
            out += [st.st_mtime_ns, st.st_size, st.st_ino]
        except OSError:
            out += [-1, -1, -1]
    return tuple(out)


class RpcTls:
    """The node's mutual-TLS material, current: the server re-reads it at each handshake
    (gRPC asks for it), channels at most once a second (LeaderPeers asks)."""

    def __init__(self, files: RpcTlsFiles, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.files = files
        self._monotonic = monotonic
        self._lock = threading.Lock()  # gRPC's handshake threads and the serving loop
        self._stamp = _stamp(files)
        self._identity = load_identity(files)  # RpcTlsError: refused at start
        self.generation = 0  # bumped at each pair re-read
        self._served_generation = 0
        self._checked_at = monotonic()

    def reload(self) -> int:
        """Re-reads the files if they changed; the current generation."""
        with self._lock:
            stamp = _stamp(self.files)
            if stamp == self._stamp:
                return self.generation
            self._stamp = stamp
            try:
                identity = load_identity(self.files)
            except RpcTlsError as exc:  # half-written, or a wrong pair: keep serving
                log.warning("RPC certificates not re-read, the previous ones kept: %s", exc)
                return self.generation
            self._identity = identity
            self.generation += 1
            log.info("RPC certificates re-read from %s", self.files.keystore)
            return self.generation

    def channel_generation(self) -> int:
        """The generation a new channel should use, the files looked at once a second."""
        now = self._monotonic()
        if now - self._checked_at >= _CHECK_EVERY_S:
            self._checked_at = now
            return self.reload()
        return self.generation

    def channel_credentials(self) -> grpc.ChannelCredentials:
        identity = self._identity
        return grpc.ssl_channel_credentials(identity.ca, identity.key, identity.chain)

    def channel_options(self) -> list[tuple[str, str]]:
        if self.files.server_name:
            return [("grpc.ssl_target_name_override", self.files.server_name)]
        return []

    def server_credentials(self) -> grpc.ServerCredentials:
        """Requires a client certificate the CA signed; the pair re-read when it changes,
        for the handshakes after (connections already made keep theirs)."""
        return grpc.dynamic_ssl_server_credentials(
            self._server_config(),
            self._fetch_server_config,
            require_client_authentication=True,
        )

    def _server_config(self) -> grpc.ServerCertificateConfiguration:
        identity = self._identity
        return grpc.ssl_server_certificate_configuration(
            [(identity.key, identity.chain)], root_certificates=identity.ca
        )

    def _fetch_server_config(self) -> grpc.ServerCertificateConfiguration | None:
        # Called by gRPC on its own thread before each handshake: None keeps the current.
        if self.reload() == self._served_generation:
            return None
        self._served_generation = self.generation
        return self._server_config()


def tls_failure(details: str) -> str | None:
    """Why a call over TLS failed, from gRPC's error details, when TLS is the reason:
    the peer's certificate refused here, or this node's refused there (the peer closes
    the connection during the handshake: TLS 1.3 tells the client no more)."""
    if "CERTIFICATE_VERIFY_FAILED" in details:
        why = details.rsplit("CERTIFICATE_VERIFY_FAILED:", 1)[-1].strip().removesuffix(": OK")
        return f"its certificate is not signed by this node's CA ({why or 'verify failed'})"
    if "Hostname Verification" in details:
        return (
            "its certificate does not name the address dialled (give the certificates that "
            "address as a SAN, or one name and zonegate.rpc.ssl.server.name)"
        )
    if "handshake failed" in details.lower():
        return "the TLS handshake failed: " + details.rsplit("handshake failed", 1)[-1].strip(" :")
    if "Socket closed" in details:
        return (
            "it closed the connection in the TLS handshake: it refuses this node's "
            "certificate, or is not the cluster's"
        )
    return None
