"""The ACL admin APIs answered by zonegate and by a real Apache Kafka broker (Kafka 4.x,
StandardAuthorizer, tests/apache_kafka.py), the same raw requests to both, the answers
compared: each refused creation's error code and message, what DescribeAcls returns
for ANY, MATCH and exact filters, what DeleteAcls names, and a filter with an unknown
part. Intended difference, never compared: DELEGATION_TOKEN and USER ACLs, which Kafka
accepts and zonegate refuses by name (it has no delegation tokens). And, on the same
broker, DescribeTopicPartitions (key 75): pages, cursors and errors; not compared there:
the empty name asked without a cursor, on which Kafka 4.3's handler fails (it takes the
name for the cursor's, a NullPointerException answered UNKNOWN_SERVER_ERROR for the whole
request) and zonegate answers INVALID_TOPIC_EXCEPTION, as Kafka means to."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.static.primitive import i8, i16, i32

from tests.apache_kafka import ApacheKafkaBroker
from tests.e2e.conftest import InProcessFactory
from tests.inprocess import InProcessNode
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.e2e

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
TOPIC, GROUP, CLUSTER = 2, 3, 4
READ, WRITE, ALTER, DESCRIBE, ALL = 3, 4, 7, 8, 2
DENY, ALLOW = 2, 3


@pytest.fixture(scope="module")
def kafka_with_acls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaBroker]:
    broker = ApacheKafkaBroker(
        tmp_path_factory.mktemp("kafka-acls"),
        {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"},
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def both(
    kafka_with_acls: ApacheKafkaBroker, inprocess_factory: InProcessFactory
) -> list[RawConnection]:
    node: InProcessNode = inprocess_factory(
        [
            "--zones",
            "zone-a",
            "--authorizer-class-name",
            STANDARD,
            "--super-users",
            "User:ANONYMOUS",
        ]
    )
    return [RawConnection(node.nodes[0].port), RawConnection(kafka_with_acls.port)]


def creation(
    rt: int, name: str, pt: int, principal: str, op: int, perm: int, host: str = "*"
) -> AclCreation:
    return AclCreation(
        resource_type=i8(rt),
        resource_name=name,
        resource_pattern_type=i8(pt),
        principal=principal,
        host=host,
        operation=i8(op),
        permission_type=i8(perm),
    )


def describe(
    rt: int, name: str | None, pt: int, principal: str | None = None, op: int = ANY, perm: int = ANY
) -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=i8(rt),
        resource_name_filter=name,
        pattern_type_filter=i8(pt),
        principal_filter=principal,
        host_filter=None,
        operation=i8(op),
        permission_type=i8(perm),
    )


def delete_filter(
    rt: int, name: str | None, pt: int, principal: str | None = None
) -> DeleteAclsFilter:
    return DeleteAclsFilter(
        resource_type_filter=i8(rt),
        resource_name_filter=name,
        pattern_type_filter=i8(pt),
        principal_filter=principal,
        host_filter=None,
        operation=i8(ANY),
        permission_type=i8(ANY),
    )


def described(answer: Any) -> set[tuple[Any, ...]]:
    return {
        (
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in answer.resources
        for a in r.acls
    }


# Each unique prefix keeps the cases apart on the one module-wide Kafka broker.
def test_refused_creations_answer_as_kafka(
    both: list[RawConnection], request: pytest.FixtureRequest
) -> None:
    tag = request.node.name[-6:]
    bad = [
        creation(CLUSTER, "other", LITERAL, "User:a", ALTER, ALLOW),
        creation(TOPIC, "", LITERAL, "User:a", READ, ALLOW),
        creation(ANY, f"t{tag}", LITERAL, "User:a", READ, ALLOW),
        creation(TOPIC, f"t{tag}", MATCH, "User:a", READ, ALLOW),
        creation(TOPIC, f"t{tag}", ANY, "User:a", READ, ALLOW),
        creation(TOPIC, f"t{tag}", LITERAL, "User:a", ANY, ALLOW),
        creation(TOPIC, f"t{tag}", LITERAL, "User:a", READ, ANY),
        creation(TOPIC, f"ok{tag}", LITERAL, "User:a", READ, ALLOW),
    ]
    # One at a time (Kafka fails a whole request that holds an ACL it cannot build)...
    for one in bad:
        ours, theirs = (c.request(CreateAclsRequest(creations=(one,))) for c in both)
        assert [(r.error_code, r.error_message) for r in ours.results] == [
            (r.error_code, r.error_message) for r in theirs.results
        ], one
    # ...and all together.
    ours, theirs = (c.request(CreateAclsRequest(creations=tuple(bad))) for c in both)
    assert [(r.error_code, r.error_message) for r in ours.results] == [
        (r.error_code, r.error_message) for r in theirs.results
    ]
    # Leave the module's Kafka broker without ACLs for the next case.
    for c in both:
        c.request(DeleteAclsRequest(filters=(delete_filter(ANY, None, ANY),)))


def test_describe_and_delete_select_as_kafka(both: list[RawConnection]) -> None:
    acls = [
        creation(TOPIC, "dx-orders", LITERAL, "User:alice", READ, ALLOW),
        creation(TOPIC, "dx-", PREFIXED, "User:alice", ALL, ALLOW),
        creation(TOPIC, "*", LITERAL, "User:bob", WRITE, DENY, "10.0.0.1"),
        creation(TOPIC, "d", PREFIXED, "User:*", DESCRIBE, ALLOW),
        creation(GROUP, "dx-", PREFIXED, "User:alice", READ, ALLOW),
        creation(CLUSTER, "kafka-cluster", LITERAL, "User:ops", ALTER, ALLOW),
    ]
    for c in both:
        answer = c.request(CreateAclsRequest(creations=tuple(acls)))
        assert all(r.error_code == 0 for r in answer.results), answer
    filters = [
        describe(ANY, None, ANY),
        describe(TOPIC, "dx-orders", MATCH),
        describe(ANY, "dx-orders", MATCH),
        describe(TOPIC, "dx-", PREFIXED),
        describe(TOPIC, "dx-", ANY),
        describe(TOPIC, "dx-orders", LITERAL),
        describe(ANY, None, ANY, principal="User:alice"),
        describe(ANY, None, ANY, op=WRITE, perm=DENY),
        describe(TOPIC, "nothing", MATCH),
    ]
    for f in filters:
        ours, theirs = (c.request(f) for c in both)
        assert (ours.error_code, ours.error_message, described(ours)) == (
            theirs.error_code,
            theirs.error_message,
            described(theirs),
        ), f
    # A filter with an unknown part: no error, nothing selected.
    for unknown in (
        describe(99, None, ANY),
        describe(TOPIC, None, 77),
        describe(ANY, None, ANY, op=99),
    ):
        ours, theirs = (c.request(unknown) for c in both)
        assert (ours.error_code, ours.error_message, described(ours)) == (
            theirs.error_code,
            theirs.error_message,
            described(theirs),
        ), unknown
    deletes = DeleteAclsRequest(
        filters=(
            delete_filter(TOPIC, "dx-orders", MATCH),
            delete_filter(ANY, None, ANY, principal="User:alice"),
            delete_filter(TOPIC, "none", LITERAL),
            delete_filter(99, None, ANY),
            delete_filter(TOPIC, None, 77),
        )
    )
    ours, theirs = (c.request(deletes) for c in both)

    def named(answer: Any) -> list[tuple[Any, ...]]:
        return [
            (
                r.error_code,
                r.error_message,
                {m.error_message for m in r.matching_acls},
                {
                    (
                        m.resource_type,
                        m.resource_name,
                        m.pattern_type,
                        m.principal,
                        m.host,
                        m.operation,
                        m.permission_type,
                    )
                    for m in r.matching_acls
                },
            )
            for r in answer.filter_results
        ]

    assert named(ours) == named(theirs)
    left = describe(ANY, None, ANY)
    ours, theirs = (c.request(left) for c in both)
    assert described(ours) == described(theirs)


# -- DescribeTopicPartitions (key 75) -------------------------------------------------
def _dtp(
    names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> DescribeTopicPartitionsRequest:
    return DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=n) for n in names),  # type: ignore[arg-type]
        response_partition_limit=i32(limit),
        cursor=None
        if cursor is None
        else Cursor(topic_name=cursor[0], partition_index=i32(cursor[1])),  # type: ignore[arg-type]
    )


def _dtp_answer(answer: Any) -> tuple[Any, ...]:
    """What both must agree on: everything but the ids of topics and nodes (only whether
    there is one) and the order of the refused topics."""
    return (
        sorted(
            (
                t.error_code,
                t.name,
                t.topic_id is None,  # the zero id, as kio reads it
                t.is_internal,
                tuple(
                    (
                        p.error_code,
                        p.partition_index,
                        p.leader_id >= 0,
                        p.leader_epoch,
                        len(p.replica_nodes),
                        len(p.isr_nodes),
                        p.eligible_leader_replicas,
                        p.last_known_elr,
                        p.offline_replicas,
                    )
                    for p in t.partitions
                ),
                t.topic_authorized_operations,
            )
            for t in answer.topics
        ),
        [t.name for t in answer.topics if t.error_code == 0],  # in name order
        None if answer.next_cursor is None else vars_of(answer.next_cursor),
    )


def vars_of(cursor: Any) -> tuple[str, int]:
    return cursor.topic_name, cursor.partition_index


def test_describe_topic_partitions_pages_as_kafka(
    both: list[RawConnection], kafka_with_acls: ApacheKafkaBroker
) -> None:
    """Kafka's pages, cursors, unknown and invalid names and refused cursors, compared
    answer by answer (the principal is a super user on both: all operations)."""
    for conn in both:
        conn.request(
            CreateTopicsRequest(
                topics=tuple(
                    CreatableTopic(
                        name=name,  # type: ignore[arg-type]
                        num_partitions=i32(n),
                        replication_factor=i16(1),
                        assignments=(),
                        configs=(),
                    )
                    for name, n in (("dtpd-a", 3), ("dtpd-b", 2))
                ),
                timeout=datetime.timedelta(seconds=30),
                validate_only=False,
            )
        )
    asks = [
        _dtp(["dtpd-b", "dtpd-a"], limit=2),
        _dtp(["dtpd-a", "dtpd-b"], limit=2, cursor=("dtpd-a", 2)),
        _dtp(["dtpd-a", "dtpd-b"], limit=3),
        _dtp(["dtpd-a", "dtpd-b"], limit=0),
        _dtp(["dtpd-b"], cursor=("dtpd-b", 5)),
        _dtp(["dtpd-a", "dtpd-nope", "bad/name", "...", "a b", "x" * 250]),
        _dtp(["dtpd-b"], cursor=("dtpd-a", 0)),
        _dtp(["dtpd-a"], cursor=("dtpd-a", -1)),
        _dtp([], limit=4, cursor=("dtpd-a", 1)),
    ]
    for ask in asks:
        # A topic made a moment ago: Kafka's broker may not have its leader yet.
        for _ in range(50):
            ours, theirs = (_dtp_answer(c.request(ask)) for c in both)
            if ours == theirs:
                break
            time.sleep(0.1)
        assert ours == theirs, ask
