"""Kafka's ACLs end to end, through real clients: authorized operations (KIP-430) with
and without an authorizer, the ACL admin APIs through confluent-kafka's AdminClient
and Kafka's own kafka-acls, and enforcement (a refused produce writes nothing, a
refused fetch returns no bytes)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from tests import java_peer
from tests.e2e.conftest import InProcessFactory, NodeFactory
from tests.kafka_raw import RawConnection
from tests.node_harness import free_port_block
from tests.postgres_server import PostgresServer
from tests.security.secure_node import plain_jaas
from zonegate.broker.node import Node
from zonegate.metastore.models import AclOperation as Op
from zonegate.metastore.models import ResourceType as RT

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


def _wait(check: Callable[[], bool], timeout: float = 5.0) -> float:
    """Seconds until `check()` held (or the test fails)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "not seen in time"
        time.sleep(0.02)
    return time.monotonic() - start


STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ON = ["--zones", "zone-a", "--authorizer-class-name", STANDARD]
ADMIN_ON = [*ON, "--super-users", "User:ANONYMOUS"]  # the PLAINTEXT listener's principal


def _binding(
    rt: ResourceType,
    name: str,
    pt: ResourcePatternType,
    principal: str,
    op: AclOperation,
    perm: AclPermissionType = AclPermissionType.ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def _key(b: AclBinding) -> tuple[object, ...]:
    return (
        b.restype,
        b.name,
        b.resource_pattern_type,
        b.principal,
        b.host,
        b.operation,
        b.permission_type,
    )


def test_without_an_authorizer_acl_admin_is_security_disabled(
    inprocess_factory: InProcessFactory,
) -> None:
    node = inprocess_factory(["--zones", "zone-a"])
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    acl = _binding(
        ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", AclOperation.READ
    )
    with pytest.raises(KafkaException) as err:
        admin.create_acls([acl])[acl].result(30)
    assert err.value.args[0].code() == 54, err.value  # SECURITY_DISABLED
    # librdkafka reports no error of DescribeAcls (an empty list): read the answer raw.
    (me,) = node.nodes
    answer = RawConnection(me.port).request(
        DescribeAclsRequest(
            resource_type_filter=i8(1),
            resource_name_filter=None,
            pattern_type_filter=i8(1),
            principal_filter=None,
            host_filter=None,
            operation=i8(1),
            permission_type=i8(1),
        )
    )
    assert answer.error_code == ErrorCode.security_disabled
    assert answer.error_message == "No Authorizer is configured on the broker"


def test_confluent_admin_creates_describes_and_deletes_acls(
    inprocess_factory: InProcessFactory,
) -> None:
    node = inprocess_factory(ADMIN_ON)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    lit, pre = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    alice_read = _binding(ResourceType.TOPIC, "orders", lit, "User:alice", AclOperation.READ)
    alice_prefix = _binding(ResourceType.TOPIC, "alice-", pre, "User:alice", AclOperation.ALL)
    bob_deny = _binding(
        ResourceType.TOPIC,
        "orders",
        lit,
        "User:bob",
        AclOperation.WRITE,
        AclPermissionType.DENY,
        "10.0.0.1",
    )
    group = _binding(ResourceType.GROUP, "alice-", pre, "User:alice", AclOperation.READ)
    cluster = _binding(ResourceType.BROKER, "kafka-cluster", lit, "User:ops", AclOperation.ALTER)
    made = admin.create_acls([alice_read, alice_prefix, bob_deny, group, cluster])
    for future in made.values():
        future.result(30)

    def described(f: AclBindingFilter) -> set[tuple[object, ...]]:
        return {_key(b) for b in admin.describe_acls(f).result(30)}

    any_ = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert described(any_) == {
        _key(b) for b in (alice_read, alice_prefix, bob_deny, group, cluster)
    }
    # MATCH: what applies to topic alice-x: the prefixed ACL only.
    match = AclBindingFilter(
        ResourceType.TOPIC,
        "alice-x",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert described(match) == {_key(alice_prefix)}
    by_principal = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:bob",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert described(by_principal) == {_key(bob_deny)}

    # Refused creations, each with Kafka's error.
    bad_cluster = _binding(ResourceType.BROKER, "other", lit, "User:ops", AclOperation.ALTER)
    refused = admin.create_acls([bad_cluster])
    for b in (bad_cluster,):
        with pytest.raises(KafkaException) as err:
            refused[b].result(30)
        assert err.value.args[0].code() == 42, err.value  # INVALID_REQUEST

    # DELEGATION_TOKEN and USER ACLs (no such type in librdkafka): refused by name.
    (me,) = node.nodes
    raw = RawConnection(me.port).request(
        CreateAclsRequest(
            creations=tuple(
                AclCreation(
                    resource_type=i8(rt),
                    resource_name="x",
                    resource_pattern_type=i8(3),
                    principal="User:ops",
                    host="*",
                    operation=i8(8),
                    permission_type=i8(3),
                )
                for rt in (6, 7)
            )
        )
    )
    for result, name in zip(raw.results, ("DELEGATION_TOKEN", "USER"), strict=True):
        assert result.error_code == ErrorCode.invalid_request
        assert name in (result.error_message or "")

    # Delete with filters: the topic ACLs of alice; the deleted ones are named.
    alice_topics = AclBindingFilter(
        ResourceType.TOPIC,
        None,
        ResourcePatternType.ANY,
        "User:alice",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deleted = admin.delete_acls([alice_topics])[alice_topics].result(30)
    assert {_key(b) for b in deleted} == {_key(alice_read), _key(alice_prefix)}
    assert described(any_) == {_key(b) for b in (bob_deny, group, cluster)}


def test_kafka_acls_adds_lists_and_removes(inprocess_factory: InProcessFactory) -> None:
    node = inprocess_factory(ADMIN_ON)
    boot = ("--bootstrap-server", node.bootstrap)
    out = java_peer.tool(
        "kafka-acls",
        *boot,
        "--add",
        "--allow-principal",
        "User:carol",
        "--operation",
        "Read",
        "--topic",
        "payments-",
        "--resource-pattern-type",
        "prefixed",
        "--group",
        "payments",
    ).stdout
    assert "payments-" in out
    listed = java_peer.tool(
        "kafka-acls", *boot, "--list", "--topic", "payments-", "--resource-pattern-type", "prefixed"
    ).stdout
    assert "User:carol" in listed and "READ" in listed and "PREFIXED" in listed
    matching = java_peer.tool(
        "kafka-acls", *boot, "--list", "--topic", "payments-eu", "--resource-pattern-type", "match"
    ).stdout
    assert "User:carol" in matching
    java_peer.tool(
        "kafka-acls",
        *boot,
        "--remove",
        "--force",
        "--allow-principal",
        "User:carol",
        "--operation",
        "Read",
        "--topic",
        "payments-",
        "--resource-pattern-type",
        "prefixed",
    )
    listed = java_peer.tool(
        "kafka-acls", *boot, "--list", "--topic", "payments-", "--resource-pattern-type", "prefixed"
    ).stdout
    assert "User:carol" not in listed
    # --resource-pattern-type applied to the group too: its ACL is PREFIXED.
    groups = java_peer.tool(
        "kafka-acls", *boot, "--list", "--group", "payments", "--resource-pattern-type", "prefixed"
    ).stdout
    assert "User:carol" in groups


# -- enforcement ---------------------------------------------------------------------
def _tenant_node(inprocess_factory: InProcessFactory) -> tuple[str, str]:
    """A node with the authorizer on: PLAINTEXT (User:ANONYMOUS, a super user: the admin)
    and SASL_PLAINTEXT with PLAIN users alice and bob. Returns both bootstraps."""
    base = free_port_block(2)
    jaas = plain_jaas({"alice": "alice-secret", "bob": "bob-secret"})
    inprocess_factory(
        [
            *ADMIN_ON,
            "--listen",
            f"PLAINTEXT://127.0.0.1:{base},SASL_PLAINTEXT://127.0.0.1:{base + 1}",
            "--sasl-enabled-mechanisms",
            "PLAIN",
            "--listener-setting",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
        ]
    )
    return f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"


def _as(bootstrap: str, user: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def _high_watermark(admin_bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": admin_bootstrap, "group.id": "hw-probe"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        consumer.close()


def test_a_refused_produce_writes_nothing_and_a_refused_fetch_returns_no_bytes(
    inprocess_factory: InProcessFactory,
) -> None:
    admin_boot, sasl_boot = _tenant_node(inprocess_factory)
    admin = AdminClient({"bootstrap.servers": admin_boot})
    for f in admin.create_topics([NewTopic("alice-orders", 1), NewTopic("bob-orders", 1)]).values():
        f.result(30)
    lit, pre = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    grants = [
        _binding(ResourceType.TOPIC, "alice-", pre, "User:alice", AclOperation.ALL),
        _binding(ResourceType.GROUP, "alice-", pre, "User:alice", AclOperation.READ),
        _binding(ResourceType.TOPIC, "bob-", pre, "User:bob", AclOperation.ALL),
    ]
    for f in admin.create_acls(grants).values():
        f.result(30)

    # alice writes her topic...
    producer = Producer({**_as(sasl_boot, "alice"), "enable.idempotence": True})
    producer.produce("alice-orders", b"mine")
    assert producer.flush(30) == 0
    assert _high_watermark(admin_boot, "alice-orders") == 1
    # ...and is refused bob's: TOPIC_AUTHORIZATION_FAILED, nothing written.
    errors: list[KafkaError] = []
    refused = Producer({**_as(sasl_boot, "alice"), "message.timeout.ms": 5000, "retries": 0})
    refused.produce("bob-orders", b"not mine", on_delivery=lambda err, _msg: errors.append(err))
    refused.flush(30)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
    assert _high_watermark(admin_boot, "bob-orders") == 0

    # Metadata: alice sees her topic, not bob's.
    alice_admin = AdminClient(_as(sasl_boot, "alice"))
    assert set(alice_admin.list_topics(timeout=30).topics) == {"alice-orders"}

    # bob's record: alice, allowed to DESCRIBE bob-orders but not READ it, fetches
    # and gets TOPIC_AUTHORIZATION_FAILED, never the record.
    bob = Producer(_as(sasl_boot, "bob"))
    bob.produce("bob-orders", b"bob's")
    assert bob.flush(30) == 0
    see = _binding(ResourceType.TOPIC, "bob-orders", lit, "User:alice", AclOperation.DESCRIBE)
    admin.create_acls([see])[see].result(30)
    consumer = Consumer(
        {
            **_as(sasl_boot, "alice"),
            "group.id": "alice-readers",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition("bob-orders", 0, 0)])
        msg = consumer.poll(15)
        assert msg is not None and msg.error() is not None, "no error, or bob's record"
        assert msg.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        later = consumer.poll(1)
        assert later is None or later.error() is not None, "a record of bob's reached alice"
    finally:
        consumer.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_acl_change_reaches_every_node_within_two_seconds(
    inprocess_factory: InProcessFactory, request: pytest.FixtureRequest, backend: str
) -> None:
    """A DENY made through one node holds on the other within 2 s (the ACL version is
    read every half second), and at once on the node that made it."""
    args = ["--zones", "zone-a,zone-b", *ADMIN_ON[2:]]
    if backend == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        args += ["--metastore", server.new_database()]
    cluster = inprocess_factory(args)
    here, there = cluster.nodes
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{here.port}"})
    allow = _binding(
        ResourceType.TOPIC, "feed", ResourcePatternType.LITERAL, "User:*", AclOperation.WRITE
    )
    admin.create_acls([allow])[allow].result(30)

    def writes(node: Node) -> bool:
        return node.authorizer.authorize(
            "User:carol", "127.0.0.1", Op.WRITE, RT.TOPIC, "feed", request="Produce"
        )

    _wait(lambda: writes(there))
    deny = _binding(
        ResourceType.TOPIC,
        "feed",
        ResourcePatternType.LITERAL,
        "User:carol",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    start = time.monotonic()
    admin.create_acls([deny])[deny].result(30)
    assert not writes(here), "at once on the node that made it"
    _wait(lambda: not writes(there))
    took = time.monotonic() - start
    print(f"DENY reached the other node ({backend}) in {took:.2f} s")
    assert took < 2.0


def test_admin_apis_and_groups_are_checked_as_kafka_checks_them(
    inprocess_factory: InProcessFactory,
) -> None:
    admin_boot, sasl_boot = _tenant_node(inprocess_factory)
    admin = AdminClient({"bootstrap.servers": admin_boot})
    for f in admin.create_topics([NewTopic("bob-orders", 1)]).values():
        f.result(30)
    pre = ResourcePatternType.PREFIXED
    grants = [
        _binding(ResourceType.TOPIC, "alice-", pre, "User:alice", AclOperation.ALL),
        _binding(ResourceType.GROUP, "alice-", pre, "User:alice", AclOperation.ALL),
    ]
    for f in admin.create_acls(grants).values():
        f.result(30)
    alice = AdminClient(_as(sasl_boot, "alice"))

    def code(future: object) -> int:
        with pytest.raises(KafkaException) as err:
            future.result(30)  # type: ignore[attr-defined]
        return int(err.value.args[0].code())

    # Topics: her prefix she may create; another's she may not, nor delete or describe.
    alice.create_topics([NewTopic("alice-new", 2)])["alice-new"].result(30)
    assert code(alice.create_topics([NewTopic("bob-new", 1)])["bob-new"]) == 29
    assert code(alice.delete_topics(["bob-orders"])["bob-orders"]) == 29
    configs = alice.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "bob-orders")])
    assert code(next(iter(configs.values()))) == 29  # TOPIC_AUTHORIZATION_FAILED
    broker = alice.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
    assert code(next(iter(broker.values()))) == 31  # CLUSTER_AUTHORIZATION_FAILED
    # ACLs: CLUSTER ALTER needed.
    acl = _binding(
        ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:alice", AclOperation.READ
    )
    assert code(alice.create_acls([acl])[acl]) == 31
    # Authorized operations: all of her topic's, none of the cluster's.
    described = alice.describe_topics(
        TopicCollection(["alice-new"]), include_authorized_operations=True
    )
    assert set(described["alice-new"].result(30).authorized_operations) == TOPIC_OPERATIONS
    cluster = alice.describe_cluster(include_authorized_operations=True).result(30)
    assert not cluster.authorized_operations
    # Groups: a group outside her prefix refuses her join.
    consumer = Consumer({**_as(sasl_boot, "alice"), "group.id": "bob-group"})
    try:
        consumer.subscribe(["alice-new"])
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is not None
        assert msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_kafka_python_admin_creates_describes_and_deletes_acls(
    inprocess_factory: InProcessFactory,
) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    node = inprocess_factory(ADMIN_ON)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=30000)
    try:
        pattern = ResourcePattern(KpResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
        acl = ACL("User:dave", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        match = ACLFilter(
            None,
            "*",
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.TOPIC, "kp-topic", ACLResourcePatternType.MATCH),
        )
        found, error = admin.describe_acls(match)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:dave", ACLOperation.WRITE, "kp-")
        ]
        gone = ACLFilter(
            "User:dave",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        ((_, deleted, delete_error),) = admin.delete_acls([gone])
        assert delete_error.errno == 0
        assert [d.principal for d in deleted] == ["User:dave"]
        assert admin.describe_acls(match)[0] == []
    finally:
        admin.close()


def test_acls_outlive_a_restart(node_factory: NodeFactory) -> None:
    """`zonegate serve` in its own process: ACLs made, the node restarted (its metadata
    store reopened), the same ACLs described."""
    node = node_factory(ADMIN_ON)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    kept = _binding(
        ResourceType.TOPIC, "kept-", ResourcePatternType.PREFIXED, "User:erin", AclOperation.READ
    )
    admin.create_acls([kept])[kept].result(30)
    node.stop()
    node.restart()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    any_ = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert [_key(b) for b in admin.describe_acls(any_).result(30)] == [_key(kept)]


def test_a_refused_group_join_leaves_the_group_unchanged(
    inprocess_factory: InProcessFactory,
) -> None:
    admin_boot, sasl_boot = _tenant_node(inprocess_factory)
    admin = AdminClient({"bootstrap.servers": admin_boot})
    admin.create_topics([NewTopic("alice-events", 1)])["alice-events"].result(30)
    pre = ResourcePatternType.PREFIXED
    grants = [
        _binding(ResourceType.TOPIC, "alice-", pre, "User:alice", AclOperation.ALL),
        _binding(ResourceType.GROUP, "alice-", pre, "User:alice", AclOperation.ALL),
        _binding(ResourceType.TOPIC, "alice-", pre, "User:bob", AclOperation.DESCRIBE),
    ]
    for f in admin.create_acls(grants).values():
        f.result(30)

    def members() -> list[str]:
        (future,) = admin.describe_consumer_groups(["alice-group"]).values()
        return sorted(m.client_id for m in future.result(30).members)

    settings = {"group.protocol": "classic", "session.timeout.ms": 6000}
    alice = Consumer(
        {**_as(sasl_boot, "alice"), **settings, "group.id": "alice-group", "client.id": "alice-1"}
    )
    try:
        alice.subscribe(["alice-events"])
        _wait(lambda: alice.poll(0.2) is None and bool(alice.assignment()), timeout=30)
        assert members() == ["alice-1"]
        bob = Consumer(
            {**_as(sasl_boot, "bob"), **settings, "group.id": "alice-group", "client.id": "bob-1"}
        )
        try:
            bob.subscribe(["alice-events"])
            msg = bob.poll(10)
            assert msg is not None and msg.error() is not None
            assert msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        finally:
            bob.close()
        assert members() == ["alice-1"], "bob's refused join changed the group"
    finally:
        alice.close()
