"""The attempts of the cross-tenant ACL matrix (tests/e2e/test_acl_matrix.py): one raw
request per Kafka API and resource, what the authorizer must check for it in Kafka's
order (KafkaApis), the error each refused check answers, and how to read the outcome.

An attempt's `checks` are (operation, resource type, name, error code): the first that
the principal may not do is the refusal the answer must carry; with all allowed, the
answer must carry one of `ok` (an allowed request may still fail for its own reasons:
a JoinGroup of a new member is told MEMBER_ID_REQUIRED, a DeleteGroups of a group with
a member NON_EMPTY_GROUP). `code` reads the one error code that tells (the topic's,
partition's, group's or request's).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.add_offsets_to_txn.v3 import request as add_offsets
from kio.schema.add_partitions_to_txn.v3 import request as add_partitions
from kio.schema.alter_client_quotas.v1 import request as alter_quotas
from kio.schema.alter_partition_reassignments.v0 import request as alter_reassign
from kio.schema.alter_user_scram_credentials.v0 import request as alter_scram
from kio.schema.consumer_group_describe.v0 import request as cg_describe
from kio.schema.consumer_group_heartbeat.v0 import request as cg_heartbeat
from kio.schema.create_acls.v3 import request as create_acls
from kio.schema.create_partitions.v3 import request as create_partitions
from kio.schema.create_topics.v7 import request as create_topics
from kio.schema.delete_acls.v3 import request as delete_acls
from kio.schema.delete_groups.v2 import request as delete_groups
from kio.schema.delete_records.v2 import request as delete_records
from kio.schema.delete_topics.v6 import request as delete_topics
from kio.schema.describe_acls.v3 import request as describe_acls
from kio.schema.describe_client_quotas.v1 import request as describe_quotas
from kio.schema.describe_cluster.v1 import request as describe_cluster
from kio.schema.describe_configs.v4 import request as describe_configs
from kio.schema.describe_groups.v5 import request as describe_groups
from kio.schema.describe_log_dirs.v4 import request as describe_log_dirs
from kio.schema.describe_topic_partitions.v0 import request as describe_tp
from kio.schema.describe_user_scram_credentials.v0 import request as describe_scram
from kio.schema.elect_leaders.v2 import request as elect_leaders
from kio.schema.end_txn.v3 import request as end_txn
from kio.schema.fetch.v12 import request as fetch
from kio.schema.find_coordinator.v4 import request as find_coordinator
from kio.schema.heartbeat.v4 import request as heartbeat
from kio.schema.incremental_alter_configs.v1 import request as alter_configs
from kio.schema.init_producer_id.v4 import request as init_producer_id
from kio.schema.join_group.v9 import request as join_group
from kio.schema.leave_group.v5 import request as leave_group
from kio.schema.list_offsets.v8 import request as list_offsets
from kio.schema.list_partition_reassignments.v0 import request as list_reassign
from kio.schema.metadata.v12 import request as metadata
from kio.schema.offset_commit.v8 import request as offset_commit
from kio.schema.offset_delete.v0 import request as offset_delete
from kio.schema.offset_fetch.v8 import request as offset_fetch
from kio.schema.offset_for_leader_epoch.v4 import request as leader_epoch
from kio.schema.produce.v9 import request as produce
from kio.schema.sync_group.v5 import request as sync_group
from kio.schema.txn_offset_commit.v3 import request as txn_offset_commit
from kio.static.primitive import i8, i16, i32, i64

from zonegate.metastore.models import AclOperation as Op
from zonegate.metastore.models import ResourceType as RT
from zonegate.records.build import build_batch

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
DENIALS = frozenset({TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED})
CLUSTER = "kafka-cluster"
ANY_NAME = "<any>"  # a check passed by the operation on any resource of the type
SECONDS = datetime.timedelta(seconds=15)
Check = tuple[Op, RT, str, int]


@dataclass(frozen=True)
class Attempt:
    api: str
    resource: str  # as the table shows it (<me>: the principal's own name)
    checks: tuple[Check, ...]
    request: Any
    code: Callable[[Any], int]
    ok: frozenset[int] = frozenset({0})
    either: tuple[Check, ...] = ()  # CreateTopics: CREATE on the cluster OR on the topic


def _top(answer: Any) -> int:
    return int(answer.error_code)


def _first_topic(answer: Any) -> int:
    return int(answer.topics[0].error_code)


def _first_partition(answer: Any) -> int:
    topics = getattr(answer, "topics", None) or answer.responses
    partitions = getattr(topics[0], "partitions", None) or topics[0].partition_responses
    return int(partitions[0].error_code)


def _results(answer: Any) -> int:
    return int(answer.results[0].error_code)


def record(value: bytes) -> bytes:
    return build_batch([(b"k", value, (), 1_700_000_000_000)])


def topic_attempts(owner: str, me: str) -> list[Attempt]:
    """What `me` tries on the topics of `owner`."""
    t, new, gone = f"{owner}-t", f"{owner}-new-{me}", f"{owner}-del-{me}"
    desc, read = (Op.DESCRIBE, RT.TOPIC, t, TOPIC_DENIED), (Op.READ, RT.TOPIC, t, TOPIC_DENIED)
    name: Any = t
    return [
        Attempt(
            "Metadata", t, (desc,),
            metadata.MetadataRequest(
                topics=(metadata.MetadataRequestTopic(topic_id=None, name=name),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            _first_topic,
        ),
        Attempt(
            "DescribeTopicPartitions", t, (desc,),
            describe_tp.DescribeTopicPartitionsRequest(
                topics=(describe_tp.TopicRequest(name=name),)
            ),
            _first_topic,
        ),
        Attempt(
            "Produce", t, ((Op.WRITE, RT.TOPIC, t, TOPIC_DENIED),),
            produce.ProduceRequest(
                transactional_id=None, acks=i16(-1), timeout=SECONDS,  # type: ignore[arg-type]
                topic_data=(
                    produce.TopicProduceData(
                        name=name,
                        partition_data=(
                            produce.PartitionProduceData(
                                index=i32(0), records=record(f"from {me}".encode())
                            ),
                        ),
                    ),
                ),
            ),
            _first_partition,
        ),
        Attempt(
            "Fetch", t, (read,),
            fetch.FetchRequest(
                max_wait=datetime.timedelta(0),  # type: ignore[arg-type]
                min_bytes=i32(0),
                topics=(
                    fetch.FetchTopic(
                        topic=name,
                        partitions=(
                            fetch.FetchPartition(
                                partition=i32(0), fetch_offset=i64(0),
                                partition_max_bytes=i32(1 << 20),
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            ),
            _first_partition,
        ),
        Attempt(
            "ListOffsets", t, (desc,),
            list_offsets.ListOffsetsRequest(
                replica_id=i32(-1), isolation_level=i8(0),  # type: ignore[arg-type]
                topics=(
                    list_offsets.ListOffsetsTopic(
                        name=name,
                        partitions=(
                            list_offsets.ListOffsetsPartition(
                                partition_index=i32(0), timestamp=i64(-1)
                            ),
                        ),
                    ),
                ),
            ),
            _first_partition,
        ),
        Attempt(
            "OffsetForLeaderEpoch", t, (desc,),
            leader_epoch.OffsetForLeaderEpochRequest(
                topics=(
                    leader_epoch.OffsetForLeaderTopic(
                        topic=name,
                        partitions=(
                            leader_epoch.OffsetForLeaderPartition(
                                partition=i32(0), leader_epoch=i32(0)
                            ),
                        ),
                    ),
                )
            ),
            _first_partition,
        ),
        Attempt(
            "CreateTopics", f"{owner}-new-<me>", (),
            create_topics.CreateTopicsRequest(
                topics=(
                    create_topics.CreatableTopic(
                        name=new,  # type: ignore[arg-type]
                        num_partitions=i32(1), replication_factor=i16(-1),
                        assignments=(), configs=(),
                    ),
                ),
                timeout=SECONDS,  # type: ignore[arg-type]
            ),
            _first_topic,
            either=(
                (Op.CREATE, RT.CLUSTER, CLUSTER, TOPIC_DENIED),
                (Op.CREATE, RT.TOPIC, new, TOPIC_DENIED),
            ),
        ),
        Attempt(
            "DeleteTopics", f"{owner}-del-<me>", ((Op.DELETE, RT.TOPIC, gone, TOPIC_DENIED),),
            delete_topics.DeleteTopicsRequest(
                topics=(delete_topics.DeleteTopicState(name=gone, topic_id=uuid.UUID(int=0)),),
                timeout=SECONDS,  # type: ignore[arg-type]
            ),
            lambda a: int(a.responses[0].error_code),
        ),
        Attempt(
            "CreatePartitions", t, ((Op.ALTER, RT.TOPIC, t, TOPIC_DENIED),),
            create_partitions.CreatePartitionsRequest(
                topics=(
                    create_partitions.CreatePartitionsTopic(
                        name=name, count=i32(2), assignments=None
                    ),
                ),
                timeout=SECONDS,  # type: ignore[arg-type]
                validate_only=True,
            ),
            _results,
        ),
        Attempt(
            "DeleteRecords", t, ((Op.DELETE, RT.TOPIC, t, TOPIC_DENIED),),
            delete_records.DeleteRecordsRequest(
                topics=(
                    delete_records.DeleteRecordsTopic(
                        name=name,
                        partitions=(
                            delete_records.DeleteRecordsPartition(
                                partition_index=i32(0), offset=i64(0)
                            ),
                        ),
                    ),
                ),
                timeout=SECONDS,  # type: ignore[arg-type]
            ),
            _first_partition,
        ),
        Attempt(
            "DescribeConfigs", t, ((Op.DESCRIBE_CONFIGS, RT.TOPIC, t, TOPIC_DENIED),),
            describe_configs.DescribeConfigsRequest(
                resources=(
                    describe_configs.DescribeConfigsResource(
                        resource_type=i8(2), resource_name=t, configuration_keys=None
                    ),
                )
            ),
            _results,
        ),
        Attempt(
            "IncrementalAlterConfigs", t, ((Op.ALTER_CONFIGS, RT.TOPIC, t, TOPIC_DENIED),),
            alter_configs.IncrementalAlterConfigsRequest(
                resources=(
                    alter_configs.AlterConfigsResource(
                        resource_type=i8(2), resource_name=t,
                        configs=(
                            alter_configs.AlterableConfig(
                                name="retention.ms", config_operation=i8(0), value="3600000"
                            ),
                        ),
                    ),
                ),
                validate_only=True,
            ),
            lambda a: int(a.responses[0].error_code),
        ),
    ]  # fmt: skip


def group_attempts(owner: str, me: str, member: tuple[str, int]) -> list[Attempt]:
    """What `me` tries on the groups of `owner`: `{owner}-g` has one member (`member`:
    its id and generation), `{owner}-o` only committed offsets, `{owner}-cg` is a
    KIP-848 consumer group."""
    g, o, cg, t = f"{owner}-g", f"{owner}-o", f"{owner}-cg", f"{owner}-t"
    read_g = (Op.READ, RT.GROUP, g, GROUP_DENIED)
    topic: Any = t
    gid: Any = g
    oid: Any = o
    return [
        Attempt(
            "FindCoordinator", g, ((Op.DESCRIBE, RT.GROUP, g, GROUP_DENIED),),
            find_coordinator.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(g,)),
            lambda a: int(a.coordinators[0].error_code),
        ),
        Attempt(
            "JoinGroup", g, (read_g,),
            join_group.JoinGroupRequest(
                group_id=gid, session_timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
                rebalance_timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
                member_id="", protocol_type="consumer",
                protocols=(join_group.JoinGroupRequestProtocol(name="range", metadata=b""),),
            ),
            _top,
            ok=frozenset({79}),  # MEMBER_ID_REQUIRED: a new member is told its id first
        ),
        Attempt(
            "SyncGroup", g, (read_g,),
            sync_group.SyncGroupRequest(
                group_id=gid, generation_id=i32(member[1]), member_id=f"{me}-stranger",
                assignments=(),
            ),
            _top,
            ok=frozenset({25}),  # UNKNOWN_MEMBER_ID
        ),
        Attempt(
            "Heartbeat", g, (read_g,),
            heartbeat.HeartbeatRequest(
                group_id=gid, generation_id=i32(member[1]), member_id=f"{me}-stranger"
            ),
            _top,
            ok=frozenset({25}),
        ),
        Attempt(
            "LeaveGroup", g, (read_g,),
            leave_group.LeaveGroupRequest(
                group_id=gid, members=(leave_group.MemberIdentity(member_id=f"{me}-stranger"),)
            ),
            _top,
        ),
        Attempt(
            "DescribeGroups", g, ((Op.DESCRIBE, RT.GROUP, g, GROUP_DENIED),),
            describe_groups.DescribeGroupsRequest(
                groups=(gid,), include_authorized_operations=False
            ),
            lambda a: int(a.groups[0].error_code),
        ),
        Attempt(
            "DeleteGroups", g, ((Op.DELETE, RT.GROUP, g, GROUP_DENIED),),
            delete_groups.DeleteGroupsRequest(groups_names=(gid,)),
            _results,
            ok=frozenset({68}),  # NON_EMPTY_GROUP: its member is still there
        ),
        Attempt(
            "OffsetCommit", o,
            ((Op.READ, RT.GROUP, o, GROUP_DENIED), (Op.READ, RT.TOPIC, t, TOPIC_DENIED)),
            offset_commit.OffsetCommitRequest(
                group_id=oid, generation_id_or_member_epoch=i32(-1), member_id="",
                topics=(
                    offset_commit.OffsetCommitRequestTopic(
                        name=topic,
                        partitions=(
                            offset_commit.OffsetCommitRequestPartition(
                                partition_index=i32(0), committed_offset=i64(1),
                                committed_metadata=me,
                            ),
                        ),
                    ),
                ),
            ),
            lambda a: _top_or(a, _first_partition),
        ),
        Attempt(
            "OffsetFetch", o,
            ((Op.DESCRIBE, RT.GROUP, o, GROUP_DENIED), (Op.DESCRIBE, RT.TOPIC, t, TOPIC_DENIED)),
            offset_fetch.OffsetFetchRequest(
                groups=(
                    offset_fetch.OffsetFetchRequestGroup(
                        group_id=oid,
                        topics=(
                            offset_fetch.OffsetFetchRequestTopics(
                                name=topic, partition_indexes=(i32(0),)
                            ),
                        ),
                    ),
                )
            ),
            lambda a: int(a.groups[0].error_code)
            or int(a.groups[0].topics[0].partitions[0].error_code),
        ),
        Attempt(
            "OffsetDelete", o,
            ((Op.DELETE, RT.GROUP, o, GROUP_DENIED), (Op.READ, RT.TOPIC, t, TOPIC_DENIED)),
            offset_delete.OffsetDeleteRequest(
                group_id=oid,
                topics=(
                    offset_delete.OffsetDeleteRequestTopic(
                        name=topic,
                        partitions=(
                            offset_delete.OffsetDeleteRequestPartition(partition_index=i32(0)),
                        ),
                    ),
                ),
            ),
            lambda a: _top_or(a, _first_partition),
        ),
        Attempt(
            "ConsumerGroupHeartbeat", cg,
            ((Op.READ, RT.GROUP, cg, GROUP_DENIED), (Op.DESCRIBE, RT.TOPIC, t, TOPIC_DENIED)),
            cg_heartbeat.ConsumerGroupHeartbeatRequest(
                group_id=cg, member_id=str(uuid.uuid4()), member_epoch=i32(0),  # type: ignore[arg-type]
                rebalance_timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
                subscribed_topic_names=(topic,),
                topic_partitions=(),
            ),
            _top,
        ),
        Attempt(
            "ConsumerGroupDescribe", cg, ((Op.DESCRIBE, RT.GROUP, cg, GROUP_DENIED),),
            cg_describe.ConsumerGroupDescribeRequest(
                group_ids=(cg,), include_authorized_operations=False  # type: ignore[arg-type]
            ),
            lambda a: int(a.groups[0].error_code),
        ),
        Attempt(
            "FindCoordinator", f"{owner}-tx",
            ((Op.DESCRIBE, RT.TRANSACTIONAL_ID, f"{owner}-tx", TXN_DENIED),),
            find_coordinator.FindCoordinatorRequest(
                key_type=i8(1), coordinator_keys=(f"{owner}-tx",)
            ),
            lambda a: int(a.coordinators[0].error_code),
        ),
    ]  # fmt: skip


# What an allowed transactional call may answer for a made-up producer (id 0, epoch 0):
# the id's real producer is another (INVALID_PRODUCER_ID_MAPPING), fenced
# (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED), or has no transaction open (INVALID_TXN_STATE);
# never a denial.
TXN_OK = frozenset({0, 47, 48, 49, 90})


def txn_attempts(owner: str, me: str) -> list[Attempt]:
    """What `me` tries with the transactional id `{owner}-tx`, on `{owner}`'s topic and
    group, in Kafka's order of checks (KafkaApis): the transactional id's WRITE first."""
    tx, t, g = f"{owner}-tx", f"{owner}-t", f"{owner}-g"
    write_tx = (Op.WRITE, RT.TRANSACTIONAL_ID, tx, TXN_DENIED)
    read_g = (Op.READ, RT.GROUP, g, GROUP_DENIED)
    topic: Any = t
    txid: Any = tx
    gid: Any = g
    pid: Any = i64(0)
    return [
        Attempt(
            "InitProducerId", tx, (write_tx,),
            init_producer_id.InitProducerIdRequest(
                transactional_id=txid, transaction_timeout=datetime.timedelta(seconds=60),  # type: ignore[arg-type]
                producer_id=i64(-1), producer_epoch=i16(-1),  # type: ignore[arg-type]
            ),
            _top,
        ),
        Attempt(
            "AddPartitionsToTxn", tx, (write_tx, (Op.WRITE, RT.TOPIC, t, TOPIC_DENIED)),
            add_partitions.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=txid, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=i16(0),
                v3_and_below_topics=(
                    add_partitions.AddPartitionsToTxnTopic(name=topic, partitions=(i32(0),)),
                ),
            ),
            lambda a: int(a.results_by_topic_v3_and_below[0].results_by_partition[0]
                          .partition_error_code),
            ok=TXN_OK,
        ),
        Attempt(
            "AddOffsetsToTxn", tx, (write_tx, read_g),
            add_offsets.AddOffsetsToTxnRequest(
                transactional_id=txid, producer_id=pid, producer_epoch=i16(0), group_id=gid
            ),
            _top,
            ok=TXN_OK,
        ),
        Attempt(
            "TxnOffsetCommit", tx, (write_tx, read_g, (Op.READ, RT.TOPIC, t, TOPIC_DENIED)),
            txn_offset_commit.TxnOffsetCommitRequest(
                transactional_id=txid, group_id=gid, producer_id=pid, producer_epoch=i16(0),
                generation_id=i32(-1), member_id="", group_instance_id=None,
                topics=(
                    txn_offset_commit.TxnOffsetCommitRequestTopic(
                        name=topic,
                        partitions=(
                            txn_offset_commit.TxnOffsetCommitRequestPartition(
                                partition_index=i32(0), committed_offset=i64(0),
                                committed_leader_epoch=i32(-1), committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            ),
            _first_partition,
            ok=TXN_OK,
        ),
        Attempt(
            "EndTxn", tx, (write_tx,),
            end_txn.EndTxnRequest(
                transactional_id=txid, producer_id=pid, producer_epoch=i16(0), committed=False
            ),
            _top,
            ok=TXN_OK,
        ),
        Attempt(
            # A transactional batch: the transactional id's WRITE, then the topic's.
            "Produce(txn)", t, (write_tx, (Op.WRITE, RT.TOPIC, t, TOPIC_DENIED)),
            produce.ProduceRequest(
                transactional_id=txid, acks=i16(-1), timeout=SECONDS,  # type: ignore[arg-type]
                topic_data=(
                    produce.TopicProduceData(
                        name=topic,
                        partition_data=(
                            produce.PartitionProduceData(
                                index=i32(0),
                                records=build_batch(
                                    [(b"k", f"txn from {me}".encode(), (), 1_700_000_000_000)],
                                    producer_id=0, producer_epoch=0, base_sequence=0,
                                    is_transactional=True,
                                ),
                            ),
                        ),
                    ),
                ),
            ),
            _first_partition,
            ok=TXN_OK,
        ),
    ]  # fmt: skip


def _top_or(answer: Any, inner: Callable[[Any], int]) -> int:
    top = int(getattr(answer, "error_code", 0))
    return top or inner(answer)


def cluster_attempts(me: str) -> list[Attempt]:
    """What `me` tries on the cluster."""
    c = CLUSTER
    alter, describe = (
        (Op.ALTER, RT.CLUSTER, c, CLUSTER_DENIED),
        (
            Op.DESCRIBE,
            RT.CLUSTER,
            c,
            CLUSTER_DENIED,
        ),
    )
    nobody_acl = dict(
        resource_type=i8(2),
        resource_name="nobody-t",
        principal="User:nobody",
        host="*",
        operation=i8(3),
        permission_type=i8(3),
    )
    return [
        Attempt(
            "CreateAcls", c, (alter,),
            create_acls.CreateAclsRequest(
                creations=(create_acls.AclCreation(resource_pattern_type=i8(3), **nobody_acl),)  # type: ignore[arg-type]
            ),
            _results,
        ),
        Attempt(
            "DescribeAcls", c, (describe,),
            describe_acls.DescribeAclsRequest(
                resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
                principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1),
            ),
            _top,
        ),
        Attempt(
            "DeleteAcls", c, (alter,),
            delete_acls.DeleteAclsRequest(
                filters=(
                    delete_acls.DeleteAclsFilter(
                        resource_type_filter=i8(1), resource_name_filter=None,
                        pattern_type_filter=i8(1), principal_filter="User:nobody",
                        host_filter=None, operation=i8(1), permission_type=i8(1),
                    ),
                )
            ),
            lambda a: int(a.filter_results[0].error_code),
        ),
        Attempt(
            "DescribeConfigs", "brokers",
            ((Op.DESCRIBE_CONFIGS, RT.CLUSTER, c, CLUSTER_DENIED),),
            describe_configs.DescribeConfigsRequest(
                resources=(
                    describe_configs.DescribeConfigsResource(
                        # The cluster-wide default, which every node answers.
                        resource_type=i8(4), resource_name="",
                        configuration_keys=("log.retention.ms",),
                    ),
                )
            ),
            _results,
        ),
        Attempt(
            "IncrementalAlterConfigs", "brokers",
            ((Op.ALTER_CONFIGS, RT.CLUSTER, c, CLUSTER_DENIED),),
            alter_configs.IncrementalAlterConfigsRequest(
                resources=(
                    alter_configs.AlterConfigsResource(
                        resource_type=i8(4), resource_name="",
                        configs=(
                            alter_configs.AlterableConfig(
                                name="log.retention.ms", config_operation=i8(0), value="3600000"
                            ),
                        ),
                    ),
                ),
                validate_only=True,
            ),
            lambda a: int(a.responses[0].error_code),
        ),
        Attempt(
            "DescribeClientQuotas", c,
            ((Op.DESCRIBE_CONFIGS, RT.CLUSTER, c, CLUSTER_DENIED),),
            describe_quotas.DescribeClientQuotasRequest(components=(), strict=False),
            _top,
        ),
        Attempt(
            "AlterClientQuotas", c, ((Op.ALTER_CONFIGS, RT.CLUSTER, c, CLUSTER_DENIED),),
            alter_quotas.AlterClientQuotasRequest(
                entries=(
                    alter_quotas.EntryData(
                        entity=(alter_quotas.EntityData(entity_type="user", entity_name="nobody"),),
                        ops=(
                            alter_quotas.OpData(key="producer_byte_rate", value=1e6, remove=False),  # type: ignore[arg-type]
                        ),
                    ),
                ),
                validate_only=True,
            ),
            lambda a: int(a.entries[0].error_code),
        ),
        Attempt(
            "DescribeUserScramCredentials", c, (describe,),
            describe_scram.DescribeUserScramCredentialsRequest(users=None),
            _top,
        ),
        Attempt(
            "AlterUserScramCredentials", c, (alter,),
            alter_scram.AlterUserScramCredentialsRequest(
                deletions=(alter_scram.ScramCredentialDeletion(name="nobody", mechanism=i8(1)),),
                upsertions=(),
            ),
            _results,
            ok=frozenset({91}),  # RESOURCE_NOT_FOUND: nobody has no credential
        ),
        Attempt(
            "DescribeLogDirs", c, (describe,),
            describe_log_dirs.DescribeLogDirsRequest(topics=None),
            _top,
        ),
        Attempt(
            "ListPartitionReassignments", c, (describe,),
            list_reassign.ListPartitionReassignmentsRequest(topics=None),
            _top,
        ),
        Attempt(
            "AlterPartitionReassignments", c, (alter,),
            alter_reassign.AlterPartitionReassignmentsRequest(topics=()),
            _top,
        ),
        Attempt(
            "ElectLeaders", c, (alter,),
            elect_leaders.ElectLeadersRequest(election_type=i8(0), topic_partitions=()),  # type: ignore[arg-type]
            _top,
        ),
        Attempt(
            "DescribeCluster", c, (describe,),
            describe_cluster.DescribeClusterRequest(include_cluster_authorized_operations=True),
            # Not refused: its authorized operations are 0 without DESCRIBE.
            lambda a: 0 if a.cluster_authorized_operations > 0 else CLUSTER_DENIED,
        ),
        Attempt(
            "InitProducerId", c, (),
            init_producer_id.InitProducerIdRequest(
                transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60)  # type: ignore[arg-type]
            ),
            _top,
            # KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic.
            either=(
                (Op.IDEMPOTENT_WRITE, RT.CLUSTER, c, CLUSTER_DENIED),
                (Op.WRITE, RT.TOPIC, ANY_NAME, CLUSTER_DENIED),
            ),
        ),
    ]  # fmt: skip
