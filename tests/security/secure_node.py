"""A node started with Kafka's listener, TLS and SASL settings in its config file.

`SecureNode` writes a `server.properties` in Kafka's own words (listeners,
listener.security.protocol.map, ssl.keystore.type=PEM, sasl.enabled.mechanisms, the
listener-prefixed JAAS lines, KIP-768's OAUTHBEARER settings) and runs
`zonegate serve --zones zone-a --config FILE` on it, one process, always stopped. The
listeners get fixed free ports so each client is pointed at the listener it means.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from tests.node_harness import free_port_block
from tests.security.certs import TestPki

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
# Kafka's SslPrincipalMapper rule: CN=alice,OU=payments,O=... -> "alice@payments".
PRINCIPAL_RULES = "RULE:^CN=([^,]+),OU=([^,]+),.*$/$1@$2/L,DEFAULT"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
OAUTH_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
FAILED_AUTH_DELAY_MS = 100


def plain_jaas(users: Mapping[str, str]) -> str:
    """PLAIN users declared as Kafka declares them: user_NAME="password" options."""
    options = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {options};"


def security_properties(
    pki: TestPki,
    ports: Mapping[str, int],
    jwks_url: str | None,
    *,
    issuer: str = "",
    audience: str = "",
    client_auth: str = "requested",
) -> dict[str, str]:
    """Kafka's settings for listeners PLAINTEXT, SSL and SASL_SSL (and SASL_PLAINTEXT when
    `ports` names it) on 127.0.0.1."""
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] + (["OAUTHBEARER"] if jwks_url else [])
    props = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": ",".join(f"{n}:{n}" for n in ports),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_file),
        "ssl.principal.mapping.rules": PRINCIPAL_RULES,
        "sasl.enabled.mechanisms": ",".join(mechanisms),
        "connection.failed.authentication.delay.ms": str(FAILED_AUTH_DELAY_MS),
    }
    if "SSL" in ports:
        props["listener.name.ssl.ssl.client.auth"] = client_auth
    for listener in (n for n in ports if n.startswith("SASL_")):
        prefix = f"listener.name.{listener.lower()}."
        props[prefix + "plain.sasl.jaas.config"] = plain_jaas(PLAIN_USERS)
        props[prefix + "scram-sha-256.sasl.jaas.config"] = SCRAM_MODULE
        props[prefix + "scram-sha-512.sasl.jaas.config"] = SCRAM_MODULE
        if jwks_url:
            props[prefix + "oauthbearer.sasl.jaas.config"] = OAUTH_MODULE
            props[prefix + "oauthbearer.sasl.server.callback.handler.class"] = OAUTH_VALIDATOR
    if jwks_url:
        props["sasl.oauthbearer.jwks.endpoint.url"] = jwks_url
        props["sasl.oauthbearer.expected.issuer"] = issuer
        props["sasl.oauthbearer.expected.audience"] = audience
        props["sasl.oauthbearer.sub.claim.name"] = "sub"
    return props


class SecureNode:
    """One `zonegate serve` process (one zone) configured by a properties file."""

    def __init__(
        self,
        data_dir: Path,
        listeners: tuple[str, ...],
        properties: Mapping[str, str] | None = None,
        args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        base = free_port_block(len(listeners))
        self.ports = {name: base + i for i, name in enumerate(listeners)}
        self.config = data_dir / "server.properties"
        self.log_path = data_dir / "node.log"
        self.args = args
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        if properties is not None:
            self.write_config(properties)

    def write_config(self, properties: Mapping[str, str]) -> None:
        self.config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))

    def bootstrap_of(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT listener (what tests/fuzzing.py's HealthCheck talks to)."""
        return self.bootstrap_of("PLAINTEXT")

    @property
    def port(self) -> int:
        return self.ports["PLAINTEXT"]

    def start(self, timeout: float = 40) -> SecureNode:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "zonegate", "serve", "--zones", "zone-a",
                    "--data-dir", str(self.data_dir), "--config", str(self.config),
                    *self.args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        waiting = set(self.ports.values())
        while waiting and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            for port in list(waiting):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    waiting.discard(port)
                except OSError:
                    pass
            time.sleep(0.1)
        if waiting:
            self.stop()
            raise RuntimeError(
                f"node did not listen on {sorted(waiting)}; log:\n{self.log_text()[-4000:]}"
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")
