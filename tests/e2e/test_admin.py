"""Admin calls and ListOffsets through real clients' admin APIs."""

from __future__ import annotations

import time

import pytest

from tests.e2e import clients
from tests.e2e.records_fixture import SampleRecord
from tests.node_harness import RunningNode

pytestmark = pytest.mark.e2e


def test_confluent_admin_topics_configs_partitions(node: RunningNode) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    fs = admin.create_topics(
        [NewTopic("adm", 2, 1, config={"retention.ms": "3600000", "cleanup.policy": "delete"})]
    )
    fs["adm"].result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics["adm"].partitions) == 2
    res = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "adm")])
    configs = list(res.values())[0].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert not configs["retention.ms"].is_default
    assert configs["max.message.bytes"].is_default
    admin.create_partitions([NewPartitions("adm", 4)])["adm"].result(10)
    assert len(admin.list_topics(timeout=10).topics["adm"].partitions) == 4
    cluster = admin.describe_cluster(request_timeout=10).result(10)
    assert [n.port for n in cluster.nodes] == [node.port]
    admin.delete_topics(["adm"])["adm"].result(10)
    assert "adm" not in admin.list_topics(timeout=10).topics


def test_every_zones_node_takes_admin_requests(node: RunningNode) -> None:
    """`zonegate serve` runs one node per zone, and one of them holds the controller lease.
    Admin clients send topic changes to the node named as controller: each zone's node must
    name one its clients can reach and serve the changes (before, the other zones' nodes
    named none and confluent-kafka's CreateTopics timed out)."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    for zone in range(3):
        bootstrap = f"127.0.0.1:{node.port + zone}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        cluster = admin.describe_cluster(request_timeout=10).result(10)
        assert cluster.controller is not None
        assert cluster.controller.port == node.port + zone
        name = f"zone-admin-{zone}"
        admin.create_topics([NewTopic(name, 1)])[name].result(10)
        admin.create_partitions([NewPartitions(name, 3)])[name].result(10)
        assert len(admin.list_topics(timeout=10).topics[name].partitions) == 3
        admin.delete_topics([name])[name].result(10)

        kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        try:
            kp.create_topics([KpNewTopic(f"{name}-kp", 2, 1)])
            assert f"{name}-kp" in kp.list_topics()
            kp.delete_topics([f"{name}-kp"])
        finally:
            kp.close()


def test_kafka_python_admin_and_deleted_topic_data_is_gone(node: RunningNode) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    admin.create_topics([NewTopic("kp-adm", 1, 1)])
    recs = [SampleRecord(b"k", b"old", (), int(time.time() * 1000))] * 5
    clients.kp_produce(node.bootstrap, "kp-adm", recs, 1)
    admin.delete_topics(["kp-adm"])
    admin.create_topics([NewTopic("kp-adm", 1, 1)])
    recs2 = [SampleRecord(b"k", b"new", (), int(time.time() * 1000))] * 2
    acks = clients.kp_produce(node.bootstrap, "kp-adm", recs2, 1)
    assert [o for _, o in acks] == [0, 1]  # a recreated topic starts empty
    got = clients.kp_consume(node.bootstrap, "kp-adm", {0: 2})
    assert [c.value for c in got] == [b"new", b"new"]
    admin.close()


def test_list_offsets_earliest_latest_timestamp_max(node: RunningNode) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = "lo"
    clients.ck_create_topic(node.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 100_000
    # Timestamps rise by 1000 ms a record, except one record far in the future.
    stamps = [base + 1000 * i for i in range(50)]
    stamps[30] = base + 3_000_000  # within message.timestamp.after.max.ms (1 h)
    recs = [SampleRecord(None, f"v{i}".encode(), (), ts) for i, ts in enumerate(stamps)]
    for codec, chunk in (("zstd", recs[:25]), ("snappy", recs[25:])):
        clients.ck_produce(node.bootstrap, topic, chunk, 1, codec)
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "lo"})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 50)
    found = c.offsets_for_times([TopicPartition(topic, 0, base + 12_500)], timeout=10)
    assert found[0].offset == 13
    found = c.offsets_for_times([TopicPartition(topic, 0, base + 40_000)], timeout=10)
    assert found[0].offset == 30  # the far-future record is the first at or after it
    found = c.offsets_for_times([TopicPartition(topic, 0, base + 20_000_000)], timeout=10)
    assert found[0].offset == -1
    c.close()
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    kc = KafkaConsumer(bootstrap_servers=node.bootstrap)
    tp = KTP(topic, 0)
    assert kc.beginning_offsets([tp])[tp] == 0
    assert kc.end_offsets([tp])[tp] == 50
    assert kc.offsets_for_times({tp: base + 26_000})[tp].offset == 26
    kc.close()
