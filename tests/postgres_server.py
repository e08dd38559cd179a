"""A real PostgreSQL server for tests: `initdb` in a temporary directory, a free port,
started and stopped by the test (no mock, no shared server).

The binaries are Debian's `postgresql` package (scripts/test installs it when
missing); `pg_config --bindir` or /usr/lib/postgresql/*/bin finds them. PostgreSQL
refuses to run as root, so as root the server runs as the `postgres` user the
package made, in a directory that user owns. `fsync=off` unless asked: the
tests kill nodes, never the machine, and a test run need not wait for the disk
(the benchmarks ask for it, to measure what a real server does).

    with PostgresServer() as pg:
        url = pg.new_database()    # postgresql://zonegate@127.0.0.1:PORT/db_1
        ...
        pg.stop(); pg.start()      # the same data, the same port

`PostgresServer(ca=trustme.CA())` serves TLS too (ssl=on) with a certificate of that CA
for 127.0.0.1 and localhost, and `ca_file` names the CA's PEM file for clients'
`sslrootcert`; connections without TLS are still accepted, as the default pg_hba.conf.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

USER = "zonegate"


def postgres_bindir() -> Path | None:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        bindir = Path(out.stdout.strip())
        if (bindir / "initdb").exists():
            return bindir
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "initdb").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self, *, fsync: bool = False, ca: Any = None) -> None:
        """`ca`: a trustme.CA whose certificate the server presents over TLS; None: no TLS."""
        self._fsync = fsync
        bindir = postgres_bindir()
        if bindir is None:
            pytest.fail("PostgreSQL is not installed: run scripts/test (it installs postgresql)")
        self._bin = bindir
        self._as_root = os.geteuid() == 0
        self.dir = Path(tempfile.mkdtemp(prefix="zonegate-pg-"))
        self.port = _free_port()
        self._databases = 0
        if self._as_root:
            shutil.chown(self.dir, "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.dir / "data"),
            "-U",
            USER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        self.ca_file: Path | None = None
        self._ssl_options = ""
        if ca is not None:
            self._ssl_options = self._write_certificate(ca)

    def _write_certificate(self, ca: Any) -> str:
        """The server's certificate and key in its directory, owned by the user it runs
        as (PostgreSQL refuses a key others can read); its ssl options."""
        cert = ca.issue_cert("127.0.0.1", "localhost")
        crt, key = self.dir / "server.crt", self.dir / "server.key"
        self.ca_file = self.dir / "ca.pem"
        cert.cert_chain_pems[0].write_to_path(str(crt))
        cert.private_key_pem.write_to_path(str(key))
        ca.cert_pem.write_to_path(str(self.ca_file))
        os.chmod(key, 0o600)
        if self._as_root:
            for path in (crt, key):
                shutil.chown(path, "postgres")
        return f" -c ssl=on -c ssl_cert_file={crt} -c ssl_key_file={key}"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self._bin / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    @property
    def admin_url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            f"-c fsync={'on' if self._fsync else 'off'} "
            "-c max_connections=300 -c shared_buffers=32MB" + self._ssl_options
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.dir / "data"),
            "-l",
            str(self.dir / "log"),
            "-o",
            options,
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")

    def new_database(self) -> str:
        """A fresh, empty database on this server; its URL."""
        self._databases += 1
        name = f"db_{self._databases}"
        self._run(
            "createdb",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            USER,
            name,
        )
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    def log(self) -> str:
        path = self.dir / "log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass  # already stopped
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
