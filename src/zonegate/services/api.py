"""What the Kafka handlers may ask of the node: narrow services, and the values they pass.

A handler decodes a request, calls these, and encodes the answer; it never
touches the metadata store, the leader, the WAL or the object store. The
services are:

- `Cluster`: the client's zone, the brokers and controller it is told of, each
  partition's leader for it, group coordinators, the node's settings.
- `Topics`: the catalog of topics: look up, create, delete, grow.
- `WritePath`: produce (validate, stage in the WAL, have the leader sequence),
  producer ids.
- `ReadPath`: fetch, offsets by time, leader-epoch ends.
- `Groups`: consumer groups and committed offsets, on whichever node
  coordinates each group.
- `LogDirs`: the node's one log directory and the sizes of the partitions it
  leads (DescribeLogDirs; services/log_dirs.py).
- `ClientQuotas`: Kafka's client quotas: AlterClientQuotas and
  DescribeClientQuotas, and each client's throttle time (services/quotas.py).
- `Leadership`: partition reassignment, leader election and each partition's
  replica list as Kafka shows it (services/reassignment.py).
- `UserScram`: users' SCRAM credentials (KIP-554): AlterUserScramCredentials,
  DescribeUserScramCredentials, and the look-up SASL SCRAM makes (services/scram.py).
- `Authorizer`: Kafka's ACLs: every check a handler makes, authorized operations
  (KIP-430), CreateAcls, DescribeAcls, DeleteAcls (services/authorizer.py).
- `Transactions`: the transaction coordinator's calls, served by the owner of the
  transactional id's shard wherever the client is connected (services/txn_routing.py).

`Services` bundles them; the request context carries it (proxy/context.py).
The value types handlers pass are defined where their owners are and named
here, so a handler imports this module and nothing else of the node.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import JoinRequest, JoinResult, SyncResult
from zonegate.coordinator.consumer_group import HeartbeatRequest, HeartbeatResult
from zonegate.coordinator.describe import (
    ClassicGroupDescription,
    ClassicMemberDescription,
    ConsumerGroupDescription,
    ConsumerMemberDescription,
)
from zonegate.coordinator.service import GroupSummary, OffsetToCommit
from zonegate.metastore.models import (
    AclBinding,
    AclOperation,
    AclPermission,
    CommittedOffset,
    NodeRecord,
    PartitionInfo,
    PatternType,
    QuotaEntity,
    ResourceType,
    TopicExists,
    TopicInfo,
)
from zonegate.services.acl_filters import (
    AclFilter,
    operation,
    pattern_type,
    permission,
    resource_type,
    unbindable,
)
from zonegate.services.authorizer import DeleteResult
from zonegate.services.catalog import InvalidTopic, check_topic_name
from zonegate.services.credentials import ScramCredentialSource
from zonegate.services.log_dirs import PartitionSize
from zonegate.services.quotas import QuotaChange, QuotaFilter, QuotaRequestError
from zonegate.services.reassignment import PREFERRED, UNCLEAN, Outcome, TopicPartition
from zonegate.services.scram import ScramAnswer, ScramUpsertion
from zonegate.services.topic_configs import (
    BROKER_DEFAULT_NAMES,
    NULL_DEFAULT_BROKER_NAMES,
    TOPIC_CONFIGS,
    InvalidConfig,
    apply_incremental,
    effective,
    validate_topic_configs,
)
from zonegate.services.txn_admin import ActiveProducer, TxnDescription, TxnListing
from zonegate.transactions.decisions import Answer as TxnAnswer
from zonegate.transactions.states import TransactionVersion
from zonegate.usage.accounting import Accounting

ANONYMOUS = "User:ANONYMOUS"  # the principal of every request until SASL exists

__all__ = [
    "ANONYMOUS",
    "ActiveProducer",
    "AclBinding",
    "AclFilter",
    "AclOperation",
    "AclPermission",
    "Authorizer",
    "DeleteResult",
    "PatternType",
    "ResourceType",
    "BROKER_DEFAULT_NAMES",
    "NULL_DEFAULT_BROKER_NAMES",
    "TOPIC_CONFIGS",
    "Accounting",
    "ClassicGroupDescription",
    "ClassicMemberDescription",
    "ClientQuotas",
    "Cluster",
    "CommittedOffset",
    "ConsumerGroupDescription",
    "ConsumerMemberDescription",
    "ErrorCode",
    "FetchPartition",
    "FetchedPartition",
    "Groups",
    "Leadership",
    "GroupSummary",
    "HeartbeatRequest",
    "HeartbeatResult",
    "InvalidConfig",
    "InvalidTopic",
    "JoinRequest",
    "JoinResult",
    "LogDirs",
    "NodeRecord",
    "OffsetAnswer",
    "OffsetToCommit",
    "Outcome",
    "PREFERRED",
    "PartitionInfo",
    "PartitionSize",
    "QuotaChange",
    "QuotaEntity",
    "QuotaFilter",
    "QuotaRequestError",
    "ProducePartition",
    "ProducedPartition",
    "ReadPath",
    "ScramAnswer",
    "ScramUpsertion",
    "Services",
    "SyncResult",
    "TopicExists",
    "TopicInfo",
    "TopicPartition",
    "Topics",
    "TransactionVersion",
    "Transactions",
    "TxnAnswer",
    "TxnAdmin",
    "TxnDescription",
    "TxnListing",
    "UNCLEAN",
    "UserScram",
    "WritePath",
    "apply_incremental",
    "check_topic_name",
    "operation",
    "pattern_type",
    "permission",
    "resource_type",
    "unbindable",
    "effective",
    "validate_topic_configs",
]


# -- cluster -------------------------------------------------------------------
class Cluster(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str:
        """Kafka's cluster id: 22 characters of base64."""
        ...

    def client_zone(self, client_id: str | None, host: str) -> str: ...

    async def check_zone(self, zone: str) -> None:
        """Before a client of `zone` (another zone's) is told of brokers: whether that
        zone's nodes are still there (services/zone_probe.py)."""
        ...

    def brokers_for(self, zone: str, listener: str | None = None) -> list[NodeRecord]:
        """The live nodes a client of `zone` is told of (those having `listener`)."""
        ...

    def controller_for(self, zone: str, listener: str | None = None) -> int:
        """The node named as controller to a client of `zone` (-1 if none)."""
        ...

    def leader_for(self, partition: PartitionInfo, zone: str, listener: str | None = None) -> int:
        """The node a client of `zone` sends this partition's produce and fetch to."""
        ...

    def leaders_for(self, zone: str, listener: str | None = None) -> Callable[[PartitionInfo], int]:
        """`leader_for` of many partitions, as the cluster is now (one Metadata answer)."""
        ...

    def rewrites(self, zone: str, listener: str | None = None) -> bool:
        """Whether a client of `zone` is told same-zone leaders (zone routing) rather than
        the real ones (routing off, or no live node in its zone)."""
        ...

    def coordinator_for(
        self, group_id: str, zone: str, listener: str | None = None
    ) -> NodeRecord | None:
        """The node FindCoordinator names to a client of `zone` for a group."""
        ...

    def txn_coordinator_for(
        self, shard: int, zone: str, listener: str | None = None
    ) -> NodeRecord | None:
        """The node FindCoordinator names to a client of `zone` for a transactional id
        of transaction shard `shard`."""
        ...

    def zone_of(self, node_id: int) -> str:
        """The zone of a live node, "" if it is not live."""
        ...

    def zone_served(self, zone: str, listener: str | None = None) -> bool | None:
        """Whether a live node of `zone` has `listener`: True; False when none does but
        nodes of `zone` are registered (the zone is lost); None when the cluster never
        had a node there."""
        ...

    def broker_configs(self) -> dict[str, str]:
        """This node's settings under their Kafka names (DescribeConfigs of a broker)."""
        ...


# -- topics --------------------------------------------------------------------
class Topics(Protocol):
    @property
    def default_partitions(self) -> int:
        """num.partitions"""
        ...

    @property
    def auto_create(self) -> bool:
        """auto.create.topics.enable"""
        ...

    def get(self, name: str) -> TopicInfo | None:
        """From the cache, as of its last refresh (the hot path)."""
        ...

    async def lookup(self, name: str) -> TopicInfo | None:
        """Also when another node made it since the cache's last refresh."""
        ...

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    async def by_id_fresh(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """`by_id`, refreshing the cache once on a miss."""
        ...

    def topics(self) -> list[TopicInfo]: ...

    async def create(self, name: str, partitions: int, configs: dict[str, str | None]) -> TopicInfo:
        """Raises InvalidTopic, InvalidConfig, TopicExists or ValueError (partition count)."""
        ...

    async def get_or_create(self, name: str, partitions: int) -> TopicInfo | None: ...

    async def delete(self, name: str) -> TopicInfo | None: ...

    async def add_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> TopicInfo:
        """LookupError if the topic does not exist, ValueError if `total` is no growth."""
        ...

    @property
    def defaults(self) -> dict[str, str]:
        """The defaults of topic configs set at run time in force on this node (its own
        over the cluster's), by topic config name."""
        ...

    @property
    def local_scope(self) -> str:
        """This node's scope of defaults: its node id as text."""
        ...

    def defaults_at(self, scope: str) -> dict[str, str]:
        """The defaults set on one scope: "" the cluster's, a node id that node's own."""
        ...

    async def alter_configs(
        self, name: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool
    ) -> TopicInfo:
        """AlterConfigs (`replace`) or IncrementalAlterConfigs (None removes);
        LookupError for an unknown topic, InvalidConfig naming a bad config."""
        ...

    async def alter_defaults(
        self, scope: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool
    ) -> None:
        """The broker configs of one scope, by broker names (`log.retention.ms`...)."""
        ...

    def group_configs(self, group_id: str) -> dict[str, str]:
        """A group's own configs (KIP-848), as set at run time."""
        ...

    async def alter_group_configs(
        self,
        group_id: str,
        changes: dict[str, str | None],
        *,
        replace: bool,
        validate_only: bool,
        bounds: Mapping[str, int] | None = None,
    ) -> None:
        """Sets (None: removes) a group's configs; InvalidConfig for a refused one."""
        ...


# -- write path ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ProducePartition:
    topic: str
    partition: int
    records: bytes | None


@dataclass(slots=True)
class ProducedPartition:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    base_offset: int = -1
    log_start_offset: int = -1
    log_append_time: int = -1  # the broker's time for a LogAppendTime topic, else -1
    record_errors: tuple[tuple[int, str | None], ...] = ()  # (record index, message)


class WritePath(Protocol):
    async def produce(
        self,
        partitions: Sequence[ProducePartition],
        *,
        client: str,
        transactional_id: str | None = None,
        produce_version: int = -1,
    ) -> list[ProducedPartition]:
        """Validates every partition's batches, stages them in the WAL, has each
        partition's leader sequence and commit them; one answer per partition, in
        order, when all are durable and indexed (or failed). `client` names the
        producer in log lines; transactional batches carry the request's
        `transactional_id` and `produce_version` to their leaders (KIP-890)."""
        ...

    async def allocate_producer_id(self) -> int: ...

    async def delete_records(
        self, topic: str, partition: int, offset: int
    ) -> tuple[ErrorCode, int]:
        """DeleteRecords of one partition: (error, low watermark after)."""
        ...


# -- read path -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FetchPartition:
    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(slots=True)
class FetchedPartition:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    log_start_offset: int = -1
    leader_epoch: int = 0
    records: bytes = b""
    # Transactions: the last stable offset (-1: the high watermark's), and for a
    # read_committed fetch the aborted transactions of the range, (producer id, first
    # offset), which clients skip.
    last_stable_offset: int = -1
    aborted_transactions: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetAnswer:
    error: ErrorCode
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1
    offsets: tuple[int, ...] = ()  # ListOffsets v0's list


class ReadPath(Protocol):
    async def fetch(
        self,
        partitions: Sequence[FetchPartition],
        *,
        max_bytes: int,
        min_bytes: int,
        max_wait_s: float,
        read_committed: bool = False,
    ) -> list[FetchedPartition]:
        """Kafka's Fetch: waits (no polling) until `min_bytes` are there or `max_wait_s`
        passes; `max_bytes` for the answer, each partition's own limit, and the first
        batch always whole. Batches come with base offset and leader epoch patched.
        `read_committed`: nothing at or past the last stable offset, and the aborted
        transactions of the range answered."""
        ...

    async def list_offset(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        *,
        max_timestamp_allowed: bool,
        read_committed: bool = False,
    ) -> OffsetAnswer:
        """ListOffsets v1+: latest (-1), earliest (-2), max timestamp (-3), by time; under
        `read_committed` (v2+) latest is the last stable offset and no offset at or past
        it is answered, as Kafka."""
        ...

    async def legacy_offsets(
        self, topic: str, partition: int, timestamp: int, max_num: int
    ) -> OffsetAnswer:
        """ListOffsets v0: up to `max_num` offsets, newest first (Kafka 3.9's walk)."""
        ...

    async def epoch_end(
        self, topic: str, partition: int, current_leader_epoch: int, epoch: int
    ) -> OffsetAnswer:
        """OffsetForLeaderEpoch: (epoch, end offset) in `leader_epoch` and `offset`."""
        ...


# -- groups ----------------------------------------------------------------------
class Groups(Protocol):
    """Consumer groups, wherever their coordinator is: a call about a group another node
    coordinates goes to that node (services/groups.py); every answer carries
    NOT_COORDINATOR when no coordinator can be reached, so the client looks it up
    again, as with Kafka."""

    async def join(self, group_id: str, req: JoinRequest) -> JoinResult: ...

    async def sync(
        self,
        group_id: str,
        *,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult: ...

    async def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode: ...

    async def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]: ...

    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: Sequence[OffsetToCommit],
    ) -> list[ErrorCode]: ...

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        offsets_partition: int,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: Sequence[OffsetToCommit],
    ) -> list[ErrorCode]:
        """TxnOffsetCommit: offsets pending in the producer's transaction until its
        marker commits them; one error per offset, in order."""
        ...

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, list[CommittedOffset]]: ...

    async def pending_offsets(self, group_id: str) -> list[tuple[str, int]]:
        """The group's partitions with an offset pending in an open transaction (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        ...

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorCode, list[ErrorCode]]: ...

    async def delete_group(self, group_id: str) -> ErrorCode: ...

    async def describe_classic(self, group_id: str) -> ClassicGroupDescription: ...

    async def consumer_heartbeat(self, group_id: str, req: HeartbeatRequest) -> HeartbeatResult: ...

    async def describe_consumer(self, group_id: str) -> ConsumerGroupDescription: ...

    async def list_groups(self) -> list[GroupSummary]:
        """Every group of the cluster, as the metadata store has it."""
        ...


class ClientQuotas(Protocol):
    async def describe(
        self, filters: Sequence[QuotaFilter], strict: bool
    ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The entities (and their quotas) the filter matches; QuotaRequestError."""
        ...

    async def alter(
        self,
        entries: Sequence[tuple[Sequence[tuple[str, str | None]], Sequence[QuotaChange]]],
        validate_only: bool,
    ) -> list[tuple[ErrorCode, str | None]]:
        """Each entry's error (or none), the valid ones applied in one transaction."""
        ...

    def applies(self, principal: str, client_id: str) -> bool:
        """Whether any quota applies to the client."""
        ...

    def record_produce(self, principal: str, client_id: str, nbytes: int) -> int:
        """Throttle time in ms (producer_byte_rate)."""
        ...

    def record_fetch(self, principal: str, client_id: str, nbytes: int) -> int:
        """Throttle time in ms (consumer_byte_rate); when > 0 the answer goes out empty."""
        ...

    def record_request_time(self, principal: str, client_id: str, seconds: float) -> int:
        """Throttle time in ms (request_percentage)."""
        ...

    def take_mutations(self, principal: str, client_id: str, partitions: int, strict: bool) -> int:
        """-1: refused (THROTTLING_QUOTA_EXCEEDED), else throttle time in ms."""
        ...

    def mutation_throttle_ms(self, principal: str, client_id: str) -> int: ...


class LogDirs(Protocol):
    @property
    def log_dir(self) -> str:
        """The one log directory this node reports (its object store's location)."""
        ...

    async def sizes(
        self, wanted: Mapping[str, Sequence[int]] | None, zone: str
    ) -> list[PartitionSize]:
        """The stored bytes of each partition a client of `zone` is told this node
        leads, of `wanted` (topic -> partitions; every one when None)."""


# -- reassignment and leader election -----------------------------------------
class Leadership(Protocol):
    def replicas(
        self, p: PartitionInfo
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Kafka's (replicas, isr, offline replicas) of a partition, as the real leaders
        are shown (zone routing off)."""
        ...

    async def reassign(
        self,
        wanted: Mapping[TopicPartition, Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments: each partition's new replica list, None to cancel;
        done when answered."""
        ...

    async def elect(
        self, election_type: int, wanted: Sequence[TopicPartition] | None
    ) -> list[tuple[TopicPartition, Outcome]]:
        """ElectLeaders (PREFERRED or UNCLEAN); every partition when `wanted` is None,
        leaving out those that need no election."""
        ...


# -- SCRAM users ---------------------------------------------------------------
class UserScram(ScramCredentialSource, Protocol):
    async def describe(self, users: Sequence[str] | None) -> list[ScramAnswer]:
        """DescribeUserScramCredentials: each user named (every user with a credential
        when None or empty), with its mechanisms and iterations, or its error."""
        ...

    async def alter(
        self, deletions: Sequence[tuple[str, int]], upsertions: Sequence[ScramUpsertion]
    ) -> list[ScramAnswer]:
        """AlterUserScramCredentials: deletions as (user, mechanism type); one answer
        per user named, the valid changes made in one transaction."""
        ...


# -- ACLs ---------------------------------------------------------------------------
class Authorizer(Protocol):
    @property
    def enabled(self) -> bool:
        """Whether authorizer.class.name names Kafka's StandardAuthorizer."""
        ...

    def authorize(
        self,
        principal: str,
        host: str,
        op: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        request: str,
        log_denied: bool = True,
    ) -> bool:
        """Whether the principal, from `host`, may do `op` on the resource; a denial is
        counted, and logged (rate-limited) when `log_denied`. True with no authorizer."""
        ...

    def authorize_by_resource_type(
        self, principal: str, host: str, op: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether `op` is allowed on some resource of the type (KIP-679)."""
        ...

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """KIP-430's bit field of the operations held on the resource."""
        ...

    async def create_acls(
        self, acls: Sequence[AclBinding]
    ) -> list[tuple[ErrorCode, str | None]]: ...

    async def describe_acls(self, acl_filter: AclFilter) -> list[AclBinding]: ...

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteResult]: ...


# -- transactions -------------------------------------------------------------------
class Transactions(Protocol):
    """The transaction coordinator (txn_coordinator/), reached through the owner of each
    id's shard. Answers carry Kafka's error code and, for InitProducerId and TV2's
    EndTxn, the producer id and epoch."""

    def shard_of(self, transactional_id: str) -> int:
        """The id's transaction shard (Kafka's partition of `__transaction_state`)."""
        ...

    async def init_producer_id(
        self, transactional_id: str | None, timeout_ms: int, expected: tuple[int, int] | None
    ) -> TxnAnswer: ...

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        client_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> TxnAnswer: ...

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890's verify-only question: each partition's error (NONE: it is in the
        producer's open transaction)."""
        ...

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_version: TransactionVersion,
    ) -> TxnAnswer: ...


# -- operating transactions (KIP-664) ------------------------------------------------
class TxnAdmin(Protocol):
    """DescribeTransactions, ListTransactions, DescribeProducers and the admin's abort
    (services/txn_admin.py)."""

    async def describe(self, transactional_id: str) -> TxnDescription:
        """From the owner of the id's shard; NOT_COORDINATOR when none is in reach."""
        ...

    async def list_transactions(
        self,
        zone: str,
        listener: str | None,
        producer_ids: Sequence[int],
        state_names: Sequence[str],
        min_duration_ms: int,
    ) -> tuple[ErrorCode, list[TxnListing], list[str]]:
        """Over the shards FindCoordinator names this node for to a client of `zone`:
        (error, listings, state names no transaction state has)."""
        ...

    async def producers(self, topic: str, partition: int) -> tuple[ErrorCode, list[ActiveProducer]]:
        """The producers the partition's leader remembers."""
        ...

    async def abort(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        partitions: Sequence[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """Admin.abortTransaction: abort markers where the producer has one open."""
        ...


@dataclass(frozen=True)
class Services:
    cluster: Cluster
    topics: Topics
    produce: WritePath
    fetch: ReadPath
    groups: Groups
    accounting: Accounting
    quotas: ClientQuotas
    log_dirs: LogDirs
    leadership: Leadership
    scram: UserScram
    authorizer: Authorizer
    transactions: Transactions
    txn_admin: TxnAdmin
