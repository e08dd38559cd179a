"""DescribeTopicPartitions (key 75) through Apache Kafka's Java admin client: kafka-topics
--describe (Admin.describeTopics, which Kafka 4's client sends as DescribeTopicPartitions
when the broker advertises it) pages through the partitions a few at a time, follows
the cursor, and prints every partition once, for a super user and for a tenant whose
ACLs give it only its own topics."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests import java_peer
from tests.e2e.conftest import InProcessFactory
from tests.node_harness import free_port_block
from tests.security.secure_node import plain_jaas

pytestmark = pytest.mark.e2e

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPICS = {"dtp-alice-a": 3, "dtp-alice-b": 2, "dtp-bob": 4}


def _described(bootstrap: str, *args: str) -> dict[str, list[str]]:
    """kafka-topics --describe: per topic, its partitions' "Partition: N" lines in order."""
    out = java_peer.tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe", *args)
    found: dict[str, list[str]] = {}
    for line in out.stdout.splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Partition" in fields:
            assert fields["Leader"] != "none" and fields["Leader"] == fields["Replicas"], line
            found.setdefault(fields["Topic"], []).append(fields["Partition"])
    return found


def test_kafka_topics_describe_pages_through_describe_topic_partitions(
    inprocess_factory: InProcessFactory, tmp_path: Path
) -> None:
    base = free_port_block(2)
    node = inprocess_factory(
        [
            "--zones", "zone-a",
            "--authorizer-class-name", STANDARD,
            "--super-users", "User:ANONYMOUS",
            "--listen", f"PLAINTEXT://127.0.0.1:{base},SASL_PLAINTEXT://127.0.0.1:{base + 1}",
            "--sasl-enabled-mechanisms", "PLAIN",
            "--listener-setting",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            + plain_jaas({"alice": "alice-secret"}),
        ]
    )  # fmt: skip
    plain, sasl = f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"
    admin = AdminClient({"bootstrap.servers": plain})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()]).values():
        f.result(30)
    grant = AclBinding(
        ResourceType.TOPIC,
        "dtp-alice-",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    admin.create_acls([grant])[grant].result(30)
    asked = node.nodes[0].server.metrics.latency.by_label

    def calls() -> int:
        h = asked.get(75)
        return 0 if h is None else h.count

    # The super user, two partitions an answer: 9 partitions in 5 answers, each once.
    every = {t: [str(i) for i in range(n)] for t, n in TOPICS.items()}
    before = calls()
    assert _described(plain, "--partition-size-limit-per-response", "2") == every
    assert calls() - before == 5
    # One topic, one partition an answer.
    before = calls()
    assert _described(plain, "--topic", "dtp-bob", "--partition-size-limit-per-response", "1") == {
        "dtp-bob": every["dtp-bob"]
    }
    assert calls() - before == 4

    # alice, over SASL_PLAINTEXT: her topics, bob's not even listed.
    props = tmp_path / "alice.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required"
        ' username="alice" password="alice-secret";\n'
    )
    theirs = _described(
        sasl, "--command-config", str(props), "--partition-size-limit-per-response", "4"
    )
    assert theirs == {t: every[t] for t in ("dtp-alice-a", "dtp-alice-b")}
