"""Moto's S3 server as a real HTTP server in a child process, for integration tests.

A separate process so the code under test talks HTTP to it exactly as to S3
(no in-process mocks), and so a hung test cannot wedge the server. The child
binds port 0 and reports the port it got, so there is no free-port race.

It is moto's own `ThreadedMotoServer` (werkzeug, a thread per connection, the
same app `moto_server` runs), untuned, for zonegate and for any peer measured
against it. Werkzeug answers every request with `Connection: close`, so each
PUT is a new TCP connection and a new server thread.

    with MotoS3Server() as s3:
        s3.create_bucket("b")
        ... s3.endpoint_url ...

Given a CA (trustme's), the same app is served over HTTPS with a certificate of that
CA for 127.0.0.1 (werkzeug's server takes an ssl context; moto's threaded server does
not pass one on): `endpoint_url` is then https://, `ca_file` the CA's PEM file.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from types import TracebackType
from typing import Any

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}

DEFAULT_BUCKET = "zonegate-test"

_CHILD = """
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()  # parent closes stdin (or dies) -> we stop
server.stop()
"""

# Moto's ThreadedMotoServer, with werkzeug's ssl context: the certificate and key files.
_CHILD_TLS = """
import sys, threading
from werkzeug.serving import make_server
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication, MotoRequestHandler, create_backend_app,
)
app = DomainDispatcherApplication(create_backend_app)
server = make_server(
    "127.0.0.1", 0, app, True, request_handler=MotoRequestHandler,
    ssl_context=(sys.argv[1], sys.argv[2]),
)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(server.server_address[1], flush=True)
sys.stdin.read()
server.shutdown()
"""


class MotoS3Server:
    def __init__(self, *, default_bucket: str | None = DEFAULT_BUCKET, ca: Any = None) -> None:
        """`ca`: a trustme.CA to serve HTTPS with a certificate of; None: HTTP."""
        self._default_bucket = default_bucket
        self._proc: subprocess.Popen[str] | None = None
        self.port = 0
        self._ca = ca
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.ca_file: str | None = None  # the CA's PEM file, when serving HTTPS

    @property
    def endpoint_url(self) -> str:
        return f"{'https' if self._ca is not None else 'http'}://127.0.0.1:{self.port}"

    def _child(self) -> list[str]:
        if self._ca is None:
            return [sys.executable, "-c", _CHILD]
        self._dir = tempfile.TemporaryDirectory(prefix="zonegate-s3-tls-")
        cert = self._ca.issue_cert("127.0.0.1", "localhost")
        chain, key = f"{self._dir.name}/s3.pem", f"{self._dir.name}/s3.key"
        self.ca_file = f"{self._dir.name}/ca.pem"
        cert.cert_chain_pems[0].write_to_path(chain)
        cert.private_key_pem.write_to_path(key)
        self._ca.cert_pem.write_to_path(self.ca_file)
        return [sys.executable, "-c", _CHILD_TLS, chain, key]

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs (benchmarks read its CPU time)."""
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout_s: float = 30.0) -> None:
        env = {**os.environ, **FAKE_AWS_ENV}
        self._proc = subprocess.Popen(
            self._child(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.isdigit():
            self.stop()
            raise RuntimeError(f"moto S3 server did not start (said {line!r})")
        self.port = int(line)
        self._wait_until_answering(timeout_s)
        if self._default_bucket:
            self.create_bucket(self._default_bucket)

    def _wait_until_answering(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                context = ssl.create_default_context(cafile=self.ca_file) if self._ca else None
                with urllib.request.urlopen(self.endpoint_url + "/", timeout=2, context=context):
                    return
            except urllib.error.HTTPError:
                return  # any HTTP answer means it is serving
            except OSError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"moto S3 server on {self.endpoint_url} never answered"
                    ) from exc
                time.sleep(0.05)

    def client(self) -> Any:
        """A synchronous botocore S3 client for test setup and inspection."""
        import botocore.session

        session = botocore.session.get_session()
        return session.create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=FAKE_AWS_ENV["AWS_DEFAULT_REGION"],
            aws_access_key_id=FAKE_AWS_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_AWS_ENV["AWS_SECRET_ACCESS_KEY"],
            verify=self.ca_file,
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
            if self._dir is not None:
                self._dir.cleanup()
                self._dir = None

    def __enter__(self) -> MotoS3Server:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
