"""AlterConfigs and IncrementalAlterConfigs through confluent-kafka's and kafka-python's
admin clients (issue 14): set, append, subtract, delete; validate_only; errors for
unknown and invalid values; cluster-wide broker defaults and the source
DescribeConfigs names for each value.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode

pytestmark = pytest.mark.e2e

# Kafka's ConfigSource names as confluent-kafka reports them.
TOPIC_SOURCE = "DYNAMIC_TOPIC_CONFIG"
DEFAULT_SOURCE = "DEFAULT_CONFIG"
BROKER_DEFAULT_SOURCE = "DYNAMIC_DEFAULT_BROKER_CONFIG"
NODE_SOURCE = "DYNAMIC_BROKER_CONFIG"


def _admin(node: InProcessNode) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": node.bootstrap})


def _create(admin: Any, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, num_partitions=1, config=configs)])[topic].result(30)


def _described(admin: Any, topic: str) -> dict[str, tuple[str, str]]:
    """name -> (value, source name) of every config of the topic."""
    from confluent_kafka.admin import ConfigResource

    res = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    entries = next(iter(res.values())).result(30)
    from confluent_kafka.admin import ConfigSource

    return {k: (e.value, ConfigSource(e.source).name) for k, e in entries.items()}


def _incremental(admin: Any, topic: str, *ops: tuple[str, str, str | None], **kw: Any) -> None:
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType[op])
        for op, name, value in ops
    ]
    res = admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)], **kw
    )
    next(iter(res.values())).result(30)


def test_confluent_incremental_set_append_subtract_delete(node: InProcessNode) -> None:
    admin = _admin(node)
    _create(admin, "inc", {"retention.ms": "600000"})
    _incremental(admin, "inc", ("SET", "retention.ms", "120000"), ("SET", "segment.ms", "5000"))
    got = _described(admin, "inc")
    assert got["retention.ms"] == ("120000", TOPIC_SOURCE)
    assert got["segment.ms"] == ("5000", TOPIC_SOURCE)
    # APPEND to a list config starts from its current value ("delete", the default).
    _incremental(admin, "inc", ("APPEND", "cleanup.policy", "compact"))
    assert _described(admin, "inc")["cleanup.policy"] == ("delete,compact", TOPIC_SOURCE)
    _incremental(admin, "inc", ("SUBTRACT", "cleanup.policy", "delete"))
    assert _described(admin, "inc")["cleanup.policy"] == ("compact", TOPIC_SOURCE)
    # DELETE: back to the default, and its source says so.
    _incremental(admin, "inc", ("DELETE", "retention.ms", None))
    got = _described(admin, "inc")
    assert got["retention.ms"] == ("604800000", DEFAULT_SOURCE)
    assert got["segment.ms"] == ("5000", TOPIC_SOURCE)  # untouched


def test_confluent_alter_configs_replaces_the_topic_configs(node: InProcessNode) -> None:
    from confluent_kafka.admin import ConfigResource

    admin = _admin(node)
    _create(admin, "whole", {"retention.ms": "600000", "segment.ms": "5000"})
    res = admin.alter_configs(
        [
            ConfigResource(
                ConfigResource.Type.TOPIC, "whole", set_config={"retention.bytes": "1000000"}
            )
        ]
    )
    next(iter(res.values())).result(30)
    got = _described(admin, "whole")
    # AlterConfigs (not incremental) sets what it names; the others return to defaults.
    assert got["retention.bytes"] == ("1000000", TOPIC_SOURCE)
    assert got["retention.ms"] == ("604800000", DEFAULT_SOURCE)
    assert got["segment.ms"] == ("604800000", DEFAULT_SOURCE)


def test_validate_only_changes_nothing(node: InProcessNode) -> None:
    admin = _admin(node)
    _create(admin, "dry", {"retention.ms": "600000"})
    _incremental(admin, "dry", ("SET", "retention.ms", "1000"), validate_only=True)
    assert _described(admin, "dry")["retention.ms"] == ("600000", TOPIC_SOURCE)
    # An invalid change is still refused when only validating.
    with pytest.raises(Exception, match="INVALID_CONFIG"):
        _incremental(admin, "dry", ("SET", "retention.ms", "soon"), validate_only=True)


@pytest.mark.parametrize(
    ("op", "name", "value", "named"),
    [
        # Kafka's, with no effect here: accepted, but checked as Kafka checks it
        ("SET", "preallocate", "maybe", "preallocate"),
        ("SET", "no.such.config", "1", "no.such.config"),
        ("SET", "retention.ms", "soon", "retention.ms"),
        ("SET", "cleanup.policy", "shred", "cleanup.policy"),
        ("SET", "message.timestamp.type", "WallClock", "message.timestamp.type"),
        ("SET", "compression.type", "brotli", "compression.type"),
        ("SET", "min.cleanable.dirty.ratio", "1.5", "min.cleanable.dirty.ratio"),
        ("APPEND", "retention.ms", "5", "retention.ms"),  # APPEND on a non-list config
    ],
)
def test_unknown_and_invalid_values_are_refused_by_name(
    node: InProcessNode, op: str, name: str, value: str, named: str
) -> None:
    admin = _admin(node)
    topic = f"bad-{abs(hash((op, name, value))) % 10**8}"
    _create(admin, topic, {})
    before = _described(admin, topic)
    with pytest.raises(Exception, match="INVALID_CONFIG") as failed:
        _incremental(admin, topic, (op, name, value))
    assert named in str(failed.value)
    assert _described(admin, topic) == before


def test_unknown_topic_is_refused(node: InProcessNode) -> None:
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
        _incremental(_admin(node), "never-created", ("SET", "retention.ms", "1000"))


def _set_cluster_default(port: int, name: str, value: str | None) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on the broker resource "" (the cluster-wide default), as
    kafka-configs.sh --entity-type brokers --entity-default sends it: the Python clients
    can only name a broker by id."""
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kio.static.primitive import i8

    from tests.kafka_raw import RawConnection

    op = 0 if value is not None else 1
    req = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=i8(4),
                resource_name="",
                configs=(AlterableConfig(name=name, config_operation=op, value=value),),
            ),
        ),
        validate_only=False,
    )
    conn = RawConnection(port)
    try:
        (answer,) = conn.request(req).responses
        return int(answer.error_code), answer.error_message
    finally:
        conn.close()


def test_broker_defaults_apply_to_topics_without_their_own(
    inprocess_factory: InProcessFactory,
) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import AlterConfigOp, ConfigResourceType
    from kafka.admin import ConfigResource as KpResource

    node = inprocess_factory(["--zones", "zone-a"])  # one node: every answer from node 1
    admin = _admin(node)
    _create(admin, "plain", {})
    _create(admin, "own", {"retention.ms": "600000"})
    kp = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=30000)

    def set_on(broker: str, configs: dict[str, Any]) -> str:
        # raise_on_unknown=False: kafka-python's pre-check looks the names up among the
        # broker's dynamic configs first.
        res = kp.alter_configs(
            [KpResource(ConfigResourceType.BROKER, broker, configs=configs)],
            raise_on_unknown=False,
            incremental=True,
        )
        return str(res["broker"][broker])

    try:
        # The cluster-wide default: topics without their own take it.
        assert _set_cluster_default(node.port, "log.retention.ms", "7200000") == (0, None)
        assert _described(admin, "plain")["retention.ms"] == ("7200000", BROKER_DEFAULT_SOURCE)
        assert _described(admin, "own")["retention.ms"] == ("600000", TOPIC_SOURCE)
        # A node's own default wins over the cluster's, as Kafka's per-broker configs do.
        assert set_on("1", {"log.retention.ms": "3600000"}) == "OK"
        assert _described(admin, "plain")["retention.ms"] == ("3600000", NODE_SOURCE)
        shown = kp.describe_configs(
            [KpResource(ConfigResourceType.BROKER, "1")], config_filter="all"
        )["broker"]["1"]
        assert shown["log.retention.ms"]["value"] == "3600000"
        assert shown["log.segment.bytes"]["value"] == "1073741824"
        # A static broker setting cannot be changed at run time; bad values are refused,
        # with Kafka's INVALID_REQUEST (42) on a broker resource, as its broker answers.
        assert "Cannot update these configs dynamically: [log.dirs]" in set_on(
            "1", {"log.dirs": "/x"}
        )
        refused = set_on("1", {"log.retention.ms": "forever"})
        assert "InvalidRequest" in refused and "log.retention.ms" in refused
        code, message = _set_cluster_default(node.port, "log.cleanup.policy", "shred")
        assert code == 42 and message is not None and "log.cleanup.policy" in message
        # Deleting each falls back a level.
        assert set_on("1", {"log.retention.ms": (AlterConfigOp.DELETE, None)}) == "OK"
        assert _described(admin, "plain")["retention.ms"] == ("7200000", BROKER_DEFAULT_SOURCE)
        assert _set_cluster_default(node.port, "log.retention.ms", None) == (0, None)
        assert _described(admin, "plain")["retention.ms"] == ("604800000", DEFAULT_SOURCE)
    finally:
        kp.close()


def test_kafka_python_admin_alters_and_resets(node: InProcessNode) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=30000)

    def configs() -> dict[str, str]:
        res = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp")], config_filter="all"
        )
        return {k: v["value"] for k, v in res["topic"]["kp"].items()}

    def alter(configs: dict[str, Any], **kw: Any) -> str:
        res = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp", configs=configs)], **kw
        )
        return str(res["topic"]["kp"])

    try:
        admin.create_topics([NewTopic("kp", 1, 1, topic_configs={"segment.ms": "5000"})])
        ok = alter(
            {"retention.ms": "90000", "cleanup.policy": (AlterConfigOp.APPEND, "compact")},
            incremental=True,
        )
        assert ok == "OK"
        got = configs()
        assert got["retention.ms"] == "90000"
        assert got["cleanup.policy"] == "delete,compact"
        assert got["segment.ms"] == "5000"
        assert (
            alter({"cleanup.policy": (AlterConfigOp.SUBTRACT, "delete")}, incremental=True) == "OK"
        )
        assert configs()["cleanup.policy"] == "compact"
        assert alter({"retention.ms": "1"}, validate_only=True, incremental=True) == "OK"
        assert configs()["retention.ms"] == "90000"
        admin.reset_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp", configs=["retention.ms"])]
        )
        assert configs()["retention.ms"] == "604800000"
        failed = alter({"retention.ms": "x"}, incremental=True)
        assert "InvalidConfig" in failed and "retention.ms" in failed
        # The old AlterConfigs request: kafka-python fills in the other set configs
        # (AlterConfigs replaces them all), so segment.ms stays.
        assert alter({"retention.bytes": "5000000"}, incremental=False) == "OK"
        got = configs()
        assert got["retention.bytes"] == "5000000" and got["segment.ms"] == "5000"
    finally:
        admin.close()
