"""kafka-configs and kafka-topics (Apache Kafka 4.3's tools, tests/java_peer.py) and
the Python clients on every config resource: topics (every standard config, those
with no effect here too), brokers and the cluster's defaults, groups (KIP-848),
clients and users. The tools' output is checked as an operator reads it; the lines
expected are those Apache Kafka 4.3.1's broker gave for the same commands."""

from __future__ import annotations

from typing import Any

import pytest

from tests import java_peer
from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode

pytestmark = pytest.mark.e2e


@pytest.fixture
def one_node(inprocess_factory: InProcessFactory) -> InProcessNode:
    return inprocess_factory(["--zones", "zone-a"])  # one node: node 1 answers all


def _configs(node: InProcessNode, *args: str, check: bool = True) -> Any:
    return java_peer.tool("kafka-configs", "--bootstrap-server", node.bootstrap, *args, check=check)


def _lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.strip()]


def _failure(proc: Any) -> str:
    """The cause kafka-configs prints for a refused change (its exit is 1)."""
    assert proc.returncode == 1, proc.stdout
    causes = [line for line in proc.stderr.splitlines() if line.startswith("Caused by: ")]
    return causes[0].removeprefix("Caused by: ") if causes else proc.stdout


def test_kafka_topics_create_with_file_delete_delay_as_librdkafka_0077(
    one_node: InProcessNode,
) -> None:
    b = one_node.bootstrap
    created = java_peer.tool(
        "kafka-topics", "--bootstrap-server", b, "--create", "--topic", "t0077",
        "--partitions", "1", "--config", "file.delete.delay.ms=10000",
        "--config", "preallocate=true", "--config", "flush.ms=1000",
    )  # fmt: skip
    assert created.stdout == "Created topic t0077.\n"
    refused = java_peer.tool(
        "kafka-topics", "--bootstrap-server", b, "--create", "--topic", "bad",
        "--config", "foo.bar=1", check=False,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "Error while executing topic command : Unknown topic config name: foo.bar" in (
        refused.stdout
    )
    shown = _lines(_configs(one_node, "--entity-type", "topics", "--entity-name", "t0077",
                            "--describe").stdout)  # fmt: skip
    assert shown == [
        "Dynamic configs for topic t0077 are:",
        "file.delete.delay.ms=10000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "file.delete.delay.ms=10000, DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}",
        # Kafka's log.flush.interval.ms has no default, so no DEFAULT_CONFIG synonym.
        "flush.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:flush.ms=1000}",
        "preallocate=true sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:preallocate=true, "
        "DEFAULT_CONFIG:log.preallocate=false}",
    ]


def test_kafka_configs_on_a_topic(one_node: InProcessNode) -> None:
    java_peer.tool("kafka-topics", "--bootstrap-server", one_node.bootstrap, "--create",
                   "--topic", "t")  # fmt: skip
    topic = ("--entity-type", "topics", "--entity-name", "t")
    throttled = "leader.replication.throttled.replicas=[0:1,0:2]"
    added = _configs(one_node, *topic, "--alter", "--add-config",
                     f"{throttled},retention.ms=3600000")  # fmt: skip
    assert added.stdout.strip() == "Completed updating config for topic t."
    refused = _configs(one_node, *topic, "--alter", "--add-config", "index.interval.bytes=-1",
                       check=False)  # fmt: skip
    assert _failure(refused) == (
        "org.apache.kafka.common.errors.InvalidConfigurationException: Invalid value -1 for "
        "configuration index.interval.bytes: Value must be at least 0"
    )
    _configs(one_node, *topic, "--alter", "--delete-config", "retention.ms")
    everything = _lines(_configs(one_node, *topic, "--describe", "--all").stdout)
    assert everything[0] == "All configs for topic t are:"
    shown = {line.split("=", 1)[0]: line for line in everything[1:]}
    assert len(shown) == 33  # every topic config of Kafka 4.3
    assert shown["leader.replication.throttled.replicas"] == (
        "leader.replication.throttled.replicas=0:1,0:2 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:leader.replication.throttled.replicas=0:1,0:2}"
    )
    assert shown["retention.ms"].startswith("retention.ms=604800000 ")
    assert shown["remote.storage.enable"] == (
        "remote.storage.enable=false sensitive=false synonyms={}"
    )
    assert shown["segment.index.bytes"] == (
        "segment.index.bytes=10485760 sensitive=false "
        "synonyms={DEFAULT_CONFIG:log.index.size.max.bytes=10485760}"
    )


def test_kafka_configs_on_brokers_and_the_cluster_default(one_node: InProcessNode) -> None:
    broker = ("--entity-type", "brokers", "--entity-name", "1")
    default = ("--entity-type", "brokers", "--entity-default")
    relogin = "sasl.kerberos.min.time.before.relogin"
    done = _configs(one_node, *broker, "--alter", "--add-config", f"{relogin}=70000")
    assert done.stdout.strip() == "Completed updating config for broker 1."
    refused = _configs(one_node, *default, "--alter", "--add-config", f"{relogin}=70000",
                       check=False)  # fmt: skip
    assert _failure(refused) == (
        "org.apache.kafka.common.errors.InvalidRequestException: Cannot update these configs "
        f"at default cluster level, broker id must be specified: [{relogin}]"
    )
    static = _configs(one_node, *broker, "--alter", "--add-config", "log.dirs=/x", check=False)
    assert _failure(static) == (
        "org.apache.kafka.common.errors.InvalidRequestException: Cannot update these configs "
        "dynamically: [log.dirs]"
    )
    done = _configs(one_node, *default, "--alter", "--add-config",
                    "log.segment.delete.delay.ms=1000,num.io.threads=4")  # fmt: skip
    assert done.stdout.strip() == "Completed updating default config for brokers in the cluster."
    # A name Kafka does not know is kept, and shown as a secret (a plugin's, maybe).
    _configs(one_node, *broker, "--alter", "--add-config", "foo.bar=1")
    assert _lines(_configs(one_node, *broker, "--describe").stdout) == [
        "Dynamic configs for broker 1 are:",
        "foo.bar=null sensitive=true synonyms={DYNAMIC_BROKER_CONFIG:foo.bar=null}",
        f"{relogin}=70000 sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{relogin}=70000, "
        f"DEFAULT_CONFIG:{relogin}=60000}}",
    ]
    assert _lines(_configs(one_node, *default, "--describe").stdout) == [
        "Default configs for brokers in the cluster are:",
        "log.segment.delete.delay.ms=1000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.delete.delay.ms=1000}",
        "num.io.threads=4 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:num.io.threads=4}",
    ]
    # The cluster's default is every topic's, and what object GC waits for them.
    java_peer.tool("kafka-topics", "--bootstrap-server", one_node.bootstrap, "--create",
                   "--topic", "gc")  # fmt: skip
    shown = _configs(one_node, "--entity-type", "topics", "--entity-name", "gc", "--describe",
                     "--all").stdout  # fmt: skip
    assert (
        "file.delete.delay.ms=1000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
        "log.segment.delete.delay.ms=1000, DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}"
    ) in shown
    everything = _lines(_configs(one_node, *broker, "--describe", "--all").stdout)
    # A config whose default is null lists no synonym, as Kafka's broker shows it.
    assert "ssl.keystore.location=null sensitive=false synonyms={}" in everything
    assert "ssl.keystore.password=null sensitive=true synonyms={}" in everything
    _configs(one_node, *default, "--alter", "--delete-config", "num.io.threads")
    assert "num.io.threads" not in _configs(one_node, *default, "--describe").stdout


def test_kafka_configs_on_a_group(one_node: InProcessNode) -> None:
    group = ("--entity-type", "groups", "--entity-name", "g1")
    done = _configs(one_node, *group, "--alter", "--add-config",
                    "consumer.session.timeout.ms=50000,streams.num.standby.replicas=1")  # fmt: skip
    assert done.stdout.strip() == "Completed updating config for group g1."
    low = _configs(one_node, *group, "--alter", "--add-config", "consumer.session.timeout.ms=500",
                   check=False)  # fmt: skip
    assert _failure(low) == (
        "org.apache.kafka.common.errors.InvalidConfigurationException: "
        "consumer.session.timeout.ms must be greater than or equal to "
        "group.consumer.min.session.timeout.ms"
    )
    unknown = _configs(one_node, *group, "--alter", "--add-config", "foo.bar=1", check=False)
    assert _failure(unknown) == (
        "org.apache.kafka.common.errors.InvalidConfigurationException: "
        "Unknown group config name: foo.bar"
    )
    assert _lines(_configs(one_node, *group, "--describe").stdout) == [
        "Dynamic configs for group g1 are:",
        "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms="
        "45000}",
        "streams.num.standby.replicas=1 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "streams.num.standby.replicas=1, DEFAULT_CONFIG:group.streams.num.standby.replicas=0}",
    ]
    everything = _lines(_configs(one_node, *group, "--describe", "--all").stdout)
    assert len(everything) == 1 + 17  # every group config of Kafka 4.3


def test_kafka_configs_on_clients_and_users(one_node: InProcessNode) -> None:
    client = ("--entity-type", "clients", "--entity-name", "c1")
    user = ("--entity-type", "users", "--entity-name", "u1")
    done = _configs(one_node, *client, "--alter", "--add-config", "producer_byte_rate=1024")
    assert done.stdout.strip() == "Completed updating config for client c1."
    assert _configs(one_node, *client, "--describe").stdout.strip() == (
        "Quota configs for client-id 'c1' are producer_byte_rate=1024.0"
    )
    done = _configs(one_node, *user, "--alter", "--add-config", "consumer_byte_rate=2048")
    assert done.stdout.strip() == "Completed updating config for user u1."
    # Describing users also asks for their SCRAM credentials: none here, as on a Kafka
    # cluster whose users have none.
    assert _configs(one_node, *user, "--describe").stdout.strip() == (
        "Quota configs for user-principal 'u1' are consumer_byte_rate=2048.0"
    )


def test_confluent_incremental_alter_of_broker_and_group(one_node: InProcessNode) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": one_node.bootstrap})

    def alter(rt: ResourceType, name: str, config: str, value: str) -> None:
        entry = ConfigEntry(config, value, incremental_operation=AlterConfigOpType.SET)
        res = ConfigResource(rt, name, incremental_configs=[entry])
        admin.incremental_alter_configs([res])[res].result(30)

    def shown(rt: ResourceType, name: str) -> dict[str, Any]:
        res = ConfigResource(rt, name)
        return dict(admin.describe_configs([res])[res].result(30))

    # librdkafka sends a GROUP config resource as Kafka's type 32.
    alter(ResourceType.BROKER, "1", "sasl.kerberos.min.time.before.relogin", "70000")
    alter(ResourceType.BROKER, "1", "log.retention.ms", "7200000")
    alter(ResourceType.GROUP, "g", "consumer.heartbeat.interval.ms", "7000")
    broker = shown(ResourceType.BROKER, "1")
    assert broker["sasl.kerberos.min.time.before.relogin"].value == "70000"
    assert broker["log.retention.ms"].value == "7200000"
    assert not broker["log.retention.ms"].is_read_only
    assert broker["broker.id"].is_read_only
    group = shown(ResourceType.GROUP, "g")
    assert group["consumer.heartbeat.interval.ms"].value == "7000"
    assert group["consumer.session.timeout.ms"].value == "45000"
    with pytest.raises(Exception, match="must be less than or equal to"):
        alter(ResourceType.GROUP, "g", "consumer.heartbeat.interval.ms", "16000")
    with pytest.raises(Exception, match="Cannot update these configs dynamically"):
        alter(ResourceType.BROKER, "1", "broker.id", "7")
