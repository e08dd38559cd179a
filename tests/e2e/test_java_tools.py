"""Apache Kafka's command-line tools (the classes behind bin/kafka-*.sh, run by
tests/java_peer.py) against zonegate, their output read as an operator reads it."""

from __future__ import annotations

import pytest

from tests import java_peer
from tests.node_harness import RunningNode

pytestmark = pytest.mark.e2e


def test_every_tool_class_is_installed() -> None:
    missing = [f"{n}: {c}" for n, c in java_peer.TOOLS.items() if not java_peer.has_class(c)]
    assert not missing


def _describe(bootstrap: str, topic: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """kafka-topics --describe: the topic's line and one line per partition, each
    "Key: value" fields separated by tabs."""
    out = java_peer.tool(
        "kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic
    )
    lines = [line for line in out.stdout.splitlines() if line.strip()]

    def fields(line: str) -> dict[str, str]:
        pairs = (
            f.split(": ", 1) if ": " in f else (f.rstrip(":"), "") for f in line.strip().split("\t")
        )
        return {k: v for k, v in pairs}

    return fields(lines[0]), [fields(line) for line in lines[1:]]


def _list(bootstrap: str) -> list[str]:
    out = java_peer.tool("kafka-topics", "--bootstrap-server", bootstrap, "--list")
    return [line for line in out.stdout.splitlines() if line]


def test_kafka_topics_create_list_describe_alter_delete(session_node: RunningNode) -> None:
    b = session_node.bootstrap
    topic = "tools-topic"
    created = java_peer.tool(
        "kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic,
        "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=3600000",
    )  # fmt: skip
    assert created.stdout == f"Created topic {topic}.\n"

    again = java_peer.tool(
        "kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "2",
        check=False,
    )  # fmt: skip
    assert again.returncode == 1
    assert again.stdout.startswith("Error while executing topic command : ")
    assert f"'{topic}' already exists" in again.stdout.lower()

    assert topic in _list(b)

    head, parts = _describe(b, topic)
    assert head["Topic"] == topic and head["TopicId"]
    assert (head["PartitionCount"], head["ReplicationFactor"]) == ("2", "1")
    assert "retention.ms=3600000" in head["Configs"].split(",")
    assert [p["Partition"] for p in parts] == ["0", "1"]
    for p in parts:
        assert p["Topic"] == topic and p["Leader"] == p["Replicas"] == p["Isr"]

    altered = java_peer.tool(
        "kafka-topics", "--bootstrap-server", b, "--alter", "--topic", topic, "--partitions", "4"
    )
    assert altered.stdout == ""
    head, parts = _describe(b, topic)
    assert head["PartitionCount"] == "4"
    assert [p["Partition"] for p in parts] == ["0", "1", "2", "3"]

    java_peer.tool("kafka-topics", "--bootstrap-server", b, "--delete", "--topic", topic)
    assert topic not in _list(b)
    gone = java_peer.tool(
        "kafka-topics", "--bootstrap-server", b, "--describe", "--topic", topic, check=False
    )
    assert gone.returncode == 1
    assert (
        gone.stdout
        == f"Error while executing topic command : Topic '{topic}' does not exist as expected\n"
    )


def test_console_producer_to_console_consumer(session_node: RunningNode) -> None:
    b = session_node.bootstrap
    topic = "tools-console"
    java_peer.tool(
        "kafka-topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "1"
    )
    typed = "k1:hello\nk2:world\nk1:again, with spaces\n"
    produced = java_peer.tool(
        "kafka-console-producer", "--bootstrap-server", b, "--topic", topic,
        "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
        input=typed,
    )  # fmt: skip
    assert produced.stdout == ""
    consumed = java_peer.tool(
        "kafka-console-consumer", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
        "--group", "tools-console-group", "--max-messages", "3", "--timeout-ms", "30000",
        "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:",
    )  # fmt: skip
    assert consumed.stdout == typed
    assert "Processed a total of 3 messages" in consumed.stderr
