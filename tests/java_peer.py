"""Runs Apache Kafka's own Java programs from the cache that scripts/test installs.

scripts/test runs Maven on tests/java/pom.xml, which copies Apache Kafka's jars
(the Java client, the tools behind bin/kafka-*.sh, the broker, Streams, Connect:
one pinned version) into .cache/java/lib and compiles the drivers under
tests/java/src into .cache/java/classes. This module puts both on a classpath
and runs a main class in a JVM of its own, the way bin/kafka-run-class.sh does,
so a test sees exactly what an operator's shell would print. When the cache is
missing the test fails, saying how to install it: a skip would hide that the
Java client went untested.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "java"
KAFKA_VERSION = "4.3.1"  # the one in tests/java/pom.xml

# bin/kafka-*.sh of Apache Kafka 4.x and the class each one runs.
TOOLS: dict[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-server-start": "kafka.Kafka",
    "connect-distributed": "org.apache.kafka.connect.cli.ConnectDistributed",
    "connect-standalone": "org.apache.kafka.connect.cli.ConnectStandalone",
}

CLIENT_DRIVER = "zonegate.javapeer.ClientDriver"

# A short-lived tool spends most of its life starting: a small heap, serial GC and
# the quick C1 compiler start it fastest on a 2-core machine (a long-running peer
# such as the broker passes its own options instead).
TOOL_JVM_OPTS: tuple[str, ...] = (
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)


def missing_message() -> str:
    return (
        f"Apache Kafka's Java artifacts ({KAFKA_VERSION}) are not installed in {CACHE}: "
        "scripts/test installs them (Maven, tests/java/pom.xml) before running pytest; "
        "run it once, or just its Maven step: mvn -q -f tests/java/pom.xml "
        "-Dmaven.repo.local=.cache/m2 compile"
    )


def jars() -> list[Path]:
    lib = CACHE / "lib"
    found = sorted(lib.glob("*.jar")) if lib.is_dir() else []
    if not found or not (CACHE / "classes").is_dir():
        import pytest  # here only: benchmarks use this module outside pytest

        pytest.fail(missing_message(), pytrace=False)
    return found


def classpath() -> str:
    # The drivers' classes (with their log4j2.properties) first, then Kafka's jars.
    return os.pathsep.join([str(CACHE / "classes"), *(str(j) for j in jars())])


def has_class(main_class: str) -> bool:
    """Whether the installed classpath holds this class (read from the jars, no JVM)."""
    entry = main_class.replace(".", "/") + ".class"
    return (CACHE / "classes" / entry).is_file() or entry in _jar_entries(tuple(jars()))


@functools.cache
def _jar_entries(paths: tuple[Path, ...]) -> frozenset[str]:
    names: set[str] = set()
    for jar in paths:
        with zipfile.ZipFile(jar) as z:
            names.update(z.namelist())
    return frozenset(names)


_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
"""


def log4j2_option(root: Path, log: Path, quiet: Sequence[str] = ()) -> str:
    """Writes `root/log4j2.properties` (INFO and up to `log`; the loggers named in `quiet`
    at WARN) and returns the JVM option that uses it."""
    path = root / "log4j2.properties"
    text = _LOG4J2.format(log=log)
    for i, name in enumerate(quiet):
        text += f"logger.quiet{i}.name = {name}\nlogger.quiet{i}.level = warn\n"
    path.write_text(text)
    return f"-Dlog4j2.configurationFile={path}"


def java_command(
    main_class: str, args: Iterable[str] = (), jvm_opts: Sequence[str] = TOOL_JVM_OPTS
) -> list[str]:
    return ["java", *jvm_opts, "-cp", classpath(), main_class, *args]


def run_class(
    main_class: str,
    args: Iterable[str] = (),
    timeout: float = 120,
    input: str | None = None,
    jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Runs `main_class` to its end in a JVM of its own; stdout and stderr as text."""
    argv = list(args)
    proc = subprocess.run(
        java_command(main_class, argv, jvm_opts),
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{main_class} {' '.join(argv)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
        )
    return proc


def tool(
    name: str,
    *args: str,
    timeout: float = 120,
    input: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Runs a bin/kafka-*.sh tool by its script name, e.g. tool("kafka-topics", "--list",
    "--bootstrap-server", node.bootstrap); by default a non-zero exit fails the test."""
    proc = run_class(TOOLS[name], list(args), timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{name} {' '.join(args)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
        )
    return proc


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def client(*args: str, timeout: float = 120) -> list[dict[str, Any]]:
    """Runs the Java client driver (tests/java/src/.../ClientDriver.java) and returns its
    JSON lines; a driver that fails fails the test with its output."""
    proc = run_class(CLIENT_DRIVER, list(args), timeout=timeout, check=True)
    return json_lines(proc.stdout)
