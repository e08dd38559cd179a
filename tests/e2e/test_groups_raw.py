"""Bad group input through a real node, on the wire: Kafka's error codes, never a stuck group.

Real clients never send most of these, so the requests are built here with kio.
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

from tests.e2e.conftest import NodeFactory
from tests.e2e.group_harness import Members, split_ok, wait_for
from tests.kafka_raw import RawConnection
from tests.node_harness import RunningNode

NODE_ARGS = ["--group-initial-rebalance-delay-ms", "0"]


def join_req(group: str, member_id: str, protocols: list[str], **kw: object) -> JoinGroupRequest:
    fields: dict[str, object] = {
        "group_id": group,
        "session_timeout": datetime.timedelta(seconds=10),
        "rebalance_timeout": datetime.timedelta(seconds=5),
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": tuple(JoinGroupRequestProtocol(name=p, metadata=b"\x00") for p in protocols),
        "reason": None,
    }
    fields.update(kw)
    return JoinGroupRequest(**fields)  # type: ignore[arg-type]


def commit_req(
    group: str, generation: int, member: str, topic: str, partition: int, metadata: str = ""
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,  # type: ignore[arg-type]
        member_id=member,
        group_instance_id=None,
        topics=(
            OffsetCommitRequestTopic(
                name=topic,  # type: ignore[arg-type]
                partitions=(
                    OffsetCommitRequestPartition(
                        partition_index=partition,  # type: ignore[arg-type]
                        committed_offset=1,  # type: ignore[arg-type]
                        committed_metadata=metadata,
                    ),
                ),
            ),
        ),
    )


def joined(conn: RawConnection, group: str, protocols: list[str]) -> tuple[str, int]:
    first = conn.request(join_req(group, "", protocols))
    assert first.error_code is ErrorCode.member_id_required
    res = conn.request(join_req(group, first.member_id, protocols))
    assert res.error_code is ErrorCode.none
    sync = conn.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=res.generation_id,
            member_id=res.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name=res.protocol_name,
            assignments=(SyncGroupRequestAssignment(member_id=res.member_id, assignment=b""),),
        )
    )
    assert sync.error_code is ErrorCode.none
    return res.member_id, int(res.generation_id)


def test_bad_group_requests_get_kafka_errors(node_factory: NodeFactory, tmp_path: object) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    node: RunningNode = node_factory(NODE_ARGS)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("raw-g", num_partitions=2)])["raw-g"].result(30)
    conn = RawConnection(node.port)
    member, generation = joined(conn, "rawgrp", ["range"])

    # Another member sharing no protocol with the group.
    res = conn.request(join_req("rawgrp", "", ["cooperative-sticky"]))
    assert res.error_code is ErrorCode.inconsistent_group_protocol
    # Session timeout outside group.min/max.session.timeout.ms.
    res = conn.request(join_req("rawgrp2", "", ["range"], session_timeout=datetime.timedelta(0)))
    assert res.error_code is ErrorCode.invalid_session_timeout
    # Empty group id.
    res = conn.request(join_req("", "", ["range"]))
    assert res.error_code is ErrorCode.invalid_group_id

    def heartbeat(member_id: str, gen: int) -> ErrorCode:
        hb = HeartbeatRequest(
            group_id="rawgrp", generation_id=gen, member_id=member_id, group_instance_id=None
        )
        return conn.request(hb).error_code  # type: ignore[no-any-return]

    assert heartbeat("stranger", generation) is ErrorCode.unknown_member_id
    assert heartbeat(member, generation + 5) is ErrorCode.illegal_generation
    assert heartbeat(member, generation) is ErrorCode.none

    def commit_error(req: OffsetCommitRequest) -> ErrorCode:
        return conn.request(req).topics[0].partitions[0].error_code  # type: ignore[no-any-return]

    assert commit_error(commit_req("rawgrp", generation, "stranger", "raw-g", 0)) is (
        ErrorCode.unknown_member_id
    )
    assert commit_error(commit_req("rawgrp", generation + 1, member, "raw-g", 0)) is (
        ErrorCode.illegal_generation
    )
    assert commit_error(commit_req("rawgrp", generation, member, "raw-g", 9)) is (
        ErrorCode.unknown_topic_or_partition
    )
    assert commit_error(commit_req("rawgrp", generation, member, "no-such-topic", 0)) is (
        ErrorCode.unknown_topic_or_partition
    )
    assert commit_error(commit_req("rawgrp", generation, member, "raw-g", 0, "m" * 5000)) is (
        ErrorCode.offset_metadata_too_large
    )
    # A simple commit (no member, generation -1) is refused while the group has members...
    assert commit_error(commit_req("rawgrp", -1, "", "raw-g", 0)) is ErrorCode.unknown_member_id
    # ...and allowed to a group without any (a fresh one here).
    assert commit_error(commit_req("simple", -1, "", "raw-g", 0)) is ErrorCode.none
    assert commit_error(commit_req("rawgrp", generation, member, "raw-g", 1)) is ErrorCode.none
    conn.close()
    assert node.alive()


def test_group_never_stuck_after_a_member_vanishes(
    node_factory: NodeFactory, members: Members
) -> None:
    """A raw member joins and disappears without leaving; real consumers of the same group
    still get every partition once its session expires."""
    from confluent_kafka.admin import AdminClient, NewTopic

    node: RunningNode = node_factory(NODE_ARGS)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("ghost", num_partitions=3)])["ghost"].result(30)
    conn = RawConnection(node.port)
    ghost = conn.request(
        join_req("ghostgrp", "", ["range"], session_timeout=datetime.timedelta(seconds=6))
    )
    conn.request(
        join_req(
            "ghostgrp", ghost.member_id, ["range"], session_timeout=datetime.timedelta(seconds=6)
        )
    )
    conn.close()  # gone without SyncGroup, heartbeat or LeaveGroup
    a = members.start("kp", node.bootstrap, "ghostgrp", "ghost", name="a")
    b = members.start("ck", node.bootstrap, "ghostgrp", "ghost", name="b")
    wait_for("real members own every partition", lambda: split_ok([a, b], 3), timeout=60)


def test_deleting_a_topic_drops_its_committed_offsets(node_factory: NodeFactory) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    node: RunningNode = node_factory(NODE_ARGS)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("again", num_partitions=1)])["again"].result(30)
    conn = RawConnection(node.port)
    res = conn.request(commit_req("keeper", -1, "", "again", 0))
    assert res.topics[0].partitions[0].error_code is ErrorCode.none

    def committed() -> int:
        req = ConsumerGroupTopicPartitions("keeper", [TopicPartition("again", 0)])
        found = admin.list_consumer_group_offsets([req])["keeper"].result(30)
        return int(found.topic_partitions[0].offset)

    assert committed() == 1
    admin.delete_topics(["again"])["again"].result(30)
    admin.create_topics([NewTopic("again", num_partitions=1)])["again"].result(30)
    assert committed() < 0  # no committed offset (librdkafka shows -1001, "invalid")
    conn.close()
