"""Kafka's ACLs end to end, through real clients: authorized operations (KIP-430) with
and without an authorizer, the ACL admin APIs through confluent-kafka's AdminClient
and Kafka's own kafka-acls, and enforcement (a refused produce writes nothing, a
refused fetch returns no bytes)."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from tests.e2e.conftest import InProcessFactory

pytestmark = pytest.mark.e2e

TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
}


def test_without_an_authorizer_every_operation_is_authorized(
    inprocess_factory: InProcessFactory,
) -> None:
    """librdkafka's DescribeTopics and DescribeCluster tests expect 8 and 7 operations."""
    node = inprocess_factory(["--zones", "zone-a"])
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("ops-topic", 1)])["ops-topic"].result(30)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS
    topics = admin.describe_topics(
        TopicCollection(["ops-topic"]), include_authorized_operations=True
    )
    described = topics["ops-topic"].result(30)
    assert set(described.authorized_operations) == TOPIC_OPERATIONS
    assert len(described.authorized_operations) == 8
    # Not asked: none given (librdkafka reports None).
    plain = admin.describe_cluster().result(30)
    assert not plain.authorized_operations
