"""librdkafka's mock cluster as a process of its own: build benchmarks/mock_cluster.c, run it.

The benchmarks compare the node's CPU time with the mock's, so the mock must not
share the client's process (`test.mock.num.brokers` would). The program is
compiled with gcc against the librdkafka that confluent-kafka's wheel bundles,
the same library the client runs, and cached under .cache/mock-cluster/ by a
hash of its source and of that library, so a second run compiles nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = Path(__file__).with_suffix(".c")


def _librdkafka() -> Path:
    """The shared librdkafka inside confluent-kafka's wheel (auditwheel's .libs directory)."""
    import confluent_kafka

    package = Path(confluent_kafka.__file__).resolve().parent
    for libs in (package.parent / "confluent_kafka.libs", package / ".libs", package / ".dylibs"):
        found = sorted(libs.glob("librdkafka*.so*")) + sorted(libs.glob("librdkafka*.dylib"))
        if found:
            return found[0]
    raise RuntimeError(f"no librdkafka shared library beside {package}: is the wheel installed?")


def build() -> Path:
    """The mock's executable, compiled once per (source, librdkafka) pair."""
    lib = _librdkafka()
    key = hashlib.sha256(SOURCE.read_bytes() + str(lib).encode()).hexdigest()[:16]
    exe = ROOT / ".cache" / "mock-cluster" / key / "mock_cluster"
    if exe.exists():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    # Compiled beside its final name and renamed, so a concurrent run never sees half a file.
    fd, tmp = tempfile.mkstemp(dir=exe.parent)
    os.close(fd)
    try:
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-o", tmp, str(SOURCE), str(lib), f"-Wl,-rpath,{lib.parent}"],
            check=True,
            capture_output=True,
            text=True,
        )
        os.replace(tmp, exe)
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"building {SOURCE.name} failed:\n{e.stderr}") from e
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return exe


@contextlib.contextmanager
def mock_cluster(brokers: int, topics: dict[str, int]) -> Iterator[tuple[str, int]]:
    """A running mock with `topics` (name -> partitions): its bootstrap servers and pid."""
    exe = build()
    proc = subprocess.Popen(
        [str(exe), str(brokers), *(f"{t}:{n}" for t, n in topics.items())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        if not bootstrap:
            raise RuntimeError(f"the mock cluster exited with {proc.wait(10)} before starting")
        yield bootstrap, proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # its signal to stop
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
