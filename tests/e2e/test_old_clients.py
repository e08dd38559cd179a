"""Clients of Kafka releases before 4.0 (issue 18): the versions KIP-896 removed, served
as Kafka 3.9 serves them.

kafka-python with `api_version` pinned to an old broker release sends the old
versions a client of that era sends (CreateTopics v0-1, DescribeConfigs v0,
OffsetCommit v0-1, OffsetFetch v0-1, ListOffsets v0, DeleteTopics v0); its own
log says which version each request had, and the test checks them. The raw
tests then check the answer fields Kafka 3.9 gives that clients do not show:
ListOffsets v0's offset lists, OffsetForLeaderEpoch v0-1, DescribeConfigs v0's
is_default, the simple-commit rule of OffsetCommit v0, and Produce v0-2 /
Fetch v0-3 answered UNSUPPORTED_VERSION without closing the connection.
"""

from __future__ import annotations

import datetime
import logging
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v4.request import ListOffsetsPartition as ListOffsetsPartitionV4
from kio.schema.list_offsets.v4.request import ListOffsetsRequest as ListOffsetsRequestV4
from kio.schema.list_offsets.v4.request import ListOffsetsTopic as ListOffsetsTopicV4
from kio.static.primitive import Records, i32Timedelta

from tests.e2e.conftest import NodeFactory
from tests.e2e.test_groups import Producer, create_topic
from tests.e2e.test_groups_raw import joined
from tests.kafka_raw import RawConnection
from tests.node_harness import RunningNode
from zonegate.proxy.legacy_schema import (
    describe_configs_v0,
    fetch_v3,
    list_offsets_v0,
    offset_commit_v0,
    offset_commit_v1,
    offset_fetch_v0,
    offset_for_leader_epoch_v0,
    offset_for_leader_epoch_v1,
    produce_v0,
    produce_v2,
)

pytestmark = pytest.mark.e2e

NODE_ARGS = ["--group-initial-rebalance-delay-ms", "0"]
_SENT = re.compile(r"Sending request \d+ (\w+)\(version=(\d+)")


@pytest.fixture
def sent_versions() -> Iterator[set[tuple[str, int]]]:
    """(request name, version) of every request kafka-python sends meanwhile, from its log."""
    seen: set[tuple[str, int]] = set()

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if m := _SENT.search(record.getMessage()):
                seen.add((m.group(1), int(m.group(2))))

    logger = logging.getLogger("kafka.protocol.parser")
    handler, level = Capture(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield seen
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_kafka_python_pinned_to_old_releases(
    node_factory: NodeFactory, sent_versions: set[tuple[str, int]]
) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    from kafka.errors import UnsupportedVersionError
    from kafka.structs import OffsetAndMetadata

    node = node_factory(NODE_ARGS)
    bs, topic = node.bootstrap, "old-clients"

    def admin(version: tuple[int, ...]) -> Any:
        return KafkaAdminClient(bootstrap_servers=bs, api_version=version)

    a0101, a0102, a011 = admin((0, 10, 1)), admin((0, 10, 2)), admin((0, 11))
    created = a0101.create_topics(
        [NewTopic(topic, 2, 1, topic_configs={"retention.ms": "3600000"})]
    )
    assert [t["error_code"] for t in created["topics"]] == [0]
    checked = a0102.create_topics([NewTopic("never-made", 1, 1)], validate_only=True)
    assert [t["error_code"] for t in checked["topics"]] == [0]
    assert "never-made" not in a011.list_topics()
    # DescribeConfigs v0: kafka-python keeps the configs whose is_default is false.
    described = a011.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert {k: v["value"] for k, v in described["topic"][topic].items()} == {
        "retention.ms": "3600000"
    }

    Producer(bs, topic, 2).send(10)  # 5 per partition, with a current client
    tp = KpTopicPartition(topic, 0)
    c0100 = KafkaConsumer(bootstrap_servers=bs, api_version=(0, 10, 0))
    assert c0100.end_offsets([tp]) == {tp: 5}
    assert c0100.beginning_offsets([tp]) == {tp: 0}
    c0100.close()

    # OffsetCommit/OffsetFetch v0 (0.8.1) and v1 (0.8.2), read back by a current client too.
    for version, group, offset in (((0, 8, 1), "g-v0", 3), ((0, 8, 2), "g-v1", 4)):
        c = KafkaConsumer(
            bootstrap_servers=bs, api_version=version, group_id=group, enable_auto_commit=False
        )
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(offset, f"by {group}", -1)})
        assert c.committed(tp) == offset
        c.close()
        current = Consumer({"bootstrap.servers": bs, "group.id": group})
        (got,) = current.committed([TopicPartition(topic, 0)], timeout=20)
        current.close()
        assert (got.offset, got.metadata) == (offset, f"by {group}")

    # Produce v2 (message format v1) is refused with Kafka's error, not a dropped connection.
    p = KafkaProducer(bootstrap_servers=bs, api_version=(0, 10, 1), retries=0)
    with pytest.raises(UnsupportedVersionError):
        p.send(topic, b"old format").get(timeout=30)
    p.close()

    deleted = a0101.delete_topics([topic])
    assert [t["error_code"] for t in deleted["topics"]] == [0]
    assert topic not in a011.list_topics()
    for a in (a0101, a0102, a011):
        a.close()
    assert {
        ("CreateTopicsRequest", 0),
        ("CreateTopicsRequest", 1),
        ("DescribeConfigsRequest", 0),
        ("ListOffsetsRequest", 0),
        ("OffsetCommitRequest", 0),
        ("OffsetFetchRequest", 0),
        ("OffsetCommitRequest", 1),
        ("OffsetFetchRequest", 1),
        ("ProduceRequest", 2),
        ("DeleteTopicsRequest", 0),
    } <= sent_versions
    assert "Traceback" not in node.log_text()


def _list_offsets_v0(conn: RawConnection, topic: str, timestamp: int, max_num: int) -> Any:
    m = list_offsets_v0
    req = m.ListOffsetsRequest(
        replica_id=-1,  # type: ignore[arg-type]
        topics=(
            m.ListOffsetsTopic(
                name=topic,  # type: ignore[arg-type]
                partitions=(
                    m.ListOffsetsPartition(
                        partition_index=0,  # type: ignore[arg-type]
                        timestamp=timestamp,  # type: ignore[arg-type]
                        max_num_offsets=max_num,  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
    )
    p = conn.request(req).topics[0].partitions[0]
    return p.error_code, tuple(p.old_style_offsets)


def test_list_offsets_v0_answers(node: RunningNode) -> None:
    bs, topic = node.bootstrap, "legacy-offsets"
    create_topic(bs, topic, 1)
    before = int(time.time() * 1000) - 60_000
    Producer(bs, topic, 1).send(3)
    conn = RawConnection(node.port)
    LATEST, EARLIEST = -1, -2
    future = int(time.time() * 1000) + 3_600_000
    assert _list_offsets_v0(conn, topic, LATEST, 1) == (ErrorCode.none, (3,))
    assert _list_offsets_v0(conn, topic, LATEST, 5) == (ErrorCode.none, (3, 0))
    assert _list_offsets_v0(conn, topic, EARLIEST, 5) == (ErrorCode.none, (0,))
    assert _list_offsets_v0(conn, topic, future, 5) == (ErrorCode.none, (3, 0))
    assert _list_offsets_v0(conn, topic, future, 0) == (ErrorCode.none, ())
    assert _list_offsets_v0(conn, topic, before, 5) == (ErrorCode.none, ())
    assert _list_offsets_v0(conn, topic, -3, 1) == (ErrorCode.unsupported_version, ())
    assert _list_offsets_v0(conn, topic, LATEST, -1) == (ErrorCode.invalid_request, ())
    assert _list_offsets_v0(conn, "no-such", LATEST, 1)[0] == ErrorCode.unknown_topic_or_partition
    conn.close()


def _epoch(conn: RawConnection, topic: str) -> int:
    req = ListOffsetsRequestV4(
        replica_id=-1,  # type: ignore[arg-type]
        isolation_level=0,  # type: ignore[arg-type]
        topics=(
            ListOffsetsTopicV4(
                name=topic,  # type: ignore[arg-type]
                partitions=(
                    ListOffsetsPartitionV4(
                        partition_index=0,  # type: ignore[arg-type]
                        current_leader_epoch=-1,  # type: ignore[arg-type]
                        timestamp=-1,  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
    )
    return int(conn.request(req).topics[0].partitions[0].leader_epoch)


def test_offset_for_leader_epoch_and_describe_configs_v0(node: RunningNode) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    bs, topic = node.bootstrap, "legacy-epochs"
    admin = AdminClient({"bootstrap.servers": bs})
    new = NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})
    admin.create_topics([new])[topic].result(30)
    Producer(bs, topic, 1).send(4)
    conn = RawConnection(node.port)
    epoch = _epoch(conn, topic)
    for module in (offset_for_leader_epoch_v0, offset_for_leader_epoch_v1):
        m: Any = module
        for asked, expected in ((epoch, (epoch, 4)), (epoch + 5, (-1, -1))):
            req = m.OffsetForLeaderEpochRequest(
                topics=(
                    m.OffsetForLeaderTopic(
                        topic=topic,
                        partitions=(m.OffsetForLeaderPartition(partition=0, leader_epoch=asked),),
                    ),
                )
            )
            got = conn.request(req).topics[0].partitions[0]
            assert got.error_code == ErrorCode.none
            assert got.end_offset == expected[1]
            assert getattr(got, "leader_epoch", expected[0]) == expected[0]

    d: Any = describe_configs_v0
    req = d.DescribeConfigsRequest(
        resources=(
            d.DescribeConfigsResource(
                resource_type=2, resource_name=topic, configuration_keys=None
            ),
            d.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None),
        )
    )
    topic_res, broker_res = conn.request(req).results
    defaults = {c.name: c.is_default for c in topic_res.configs}
    assert defaults["retention.ms"] is False
    assert defaults["cleanup.policy"] is True
    assert {c.name: c.value for c in topic_res.configs}["retention.ms"] == "3600000"
    assert broker_res.error_code == ErrorCode.none
    assert all(c.read_only and not c.is_default for c in broker_res.configs)
    conn.close()


def _commit(module: Any, group: str, topic: str, offset: int, **member: Any) -> Any:
    m = module
    return m.OffsetCommitRequest(
        group_id=group,
        **member,
        topics=(
            m.OffsetCommitRequestTopic(
                name=topic,
                partitions=(
                    m.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_metadata="old"
                    ),
                ),
            ),
        ),
    )


def test_offset_commit_v0_v1_follow_the_group_rules(node_factory: NodeFactory) -> None:
    node = node_factory(NODE_ARGS)
    bs, topic, group = node.bootstrap, "legacy-commits", "g-legacy"
    create_topic(bs, topic, 1)
    conn = RawConnection(node.port)
    member_id, generation = joined(conn, group, ["range"])

    def error(req: Any) -> ErrorCode:
        return conn.request(req).topics[0].partitions[0].error_code  # type: ignore[no-any-return]

    # v0 has no member: a simple commit, refused while the group has a member (Kafka's rule).
    assert error(_commit(offset_commit_v0, group, topic, 2)) == ErrorCode.unknown_member_id
    member = {"generation_id_or_member_epoch": generation, "member_id": member_id}
    assert error(_commit(offset_commit_v1, group, topic, 6, **member)) == ErrorCode.none
    stale = {"generation_id_or_member_epoch": generation + 1, "member_id": member_id}
    assert (
        error(_commit(offset_commit_v1, group, topic, 7, **stale)) == ErrorCode.illegal_generation
    )
    # A group nobody is in takes v0 commits; OffsetFetch v0 reads them back.
    assert error(_commit(offset_commit_v0, "g-simple", topic, 9)) == ErrorCode.none
    f: Any = offset_fetch_v0
    for g, offset in ((group, 6), ("g-simple", 9), ("g-nothing", -1)):
        req = f.OffsetFetchRequest(
            group_id=g, topics=(f.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),)
        )
        got = conn.request(req).topics[0].partitions[0]
        assert (got.committed_offset, got.error_code) == (offset, ErrorCode.none)
    conn.close()


def test_produce_v0_2_and_fetch_v0_3_answer_unsupported_version(node: RunningNode) -> None:
    bs, topic = node.bootstrap, "legacy-refused"
    create_topic(bs, topic, 2)
    conn = RawConnection(node.port)

    def produce(module: Any, acks: int) -> Any:
        return module.ProduceRequest(
            acks=acks,
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
            topic_data=(
                module.TopicProduceData(
                    name=topic,
                    partition_data=tuple(
                        module.PartitionProduceData(index=i, records=Records(b"\x00" * 30))
                        for i in (0, 1)
                    ),
                ),
            ),
        )

    answer = conn.request(produce(produce_v2, acks=1))
    parts = answer.responses[0].partition_responses
    assert [(p.index, p.error_code) for p in parts] == [
        (0, ErrorCode.unsupported_version),
        (1, ErrorCode.unsupported_version),
    ]
    f: Any = fetch_v3
    fetch = f.FetchRequest(
        replica_id=-1,
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=10)),
        min_bytes=1,
        max_bytes=1 << 20,
        topics=(
            f.FetchTopic(
                topic=topic,
                partitions=(
                    f.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1000),
                ),
            ),
        ),
    )
    got = conn.request(fetch).responses[0].partitions[0]
    assert (got.partition_index, got.error_code) == (1, ErrorCode.unsupported_version)
    # acks=0 gets no answer (the next answer on the connection is the next request's), and
    # the connection stays open; ApiVersions advertises neither refused range.
    conn.send_bytes(_frame(produce(produce_v0, acks=0), 100))
    versions = {
        k.api_key: (k.min_version, k.max_version)
        for k in conn.request(ApiVersionsRequest()).api_keys
    }
    assert versions[0][0] == 3 and versions[1][0] == 4
    assert "dropped a Produce v0 request (acks=0)" in node.log_text()
    conn.close()


def _frame(request: Any, correlation_id: int) -> bytes:
    from zonegate.proxy.codec import encode_request

    return encode_request(correlation_id, "raw-test", request)
