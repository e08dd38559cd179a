"""The metadata store's protocols, one per concern, and how a URL picks a backend.

- `ClusterStore`: topics and partitions, leader moves, nodes and leases, the
  cluster's secrets, the metadata version.
- `StreamStore` (defined by the storage layer, storage/index.py): partitions'
  index entries and producer state, committed together, fenced by epoch.
- `ProducerIds`: producer id allocation (InitProducerId).
- `GroupStore`: consumer groups' state and committed offsets.
- `GcStore` (storage/index.py, for maintenance/gc.py): which objects entries still name,
  and object GC's pending list.
- `QuotaStore`: Kafka's client quotas (AlterClientQuotas), by entity.
- `ScramStore`: users' SCRAM credentials (AlterUserScramCredentials), salted.
- `AclStore`: Kafka's ACLs (CreateAcls, DeleteAcls), and a version that moves with them.
- `TransactionStore`: transaction coordinator shards (owner, epoch) and each
  transactional id's state, written fenced by its shard's epoch (docs/transactions.md).
- `PendingOffsetStore`: offsets committed in a transaction, pending until it ends.

Each user names only the protocol it needs; a backend implements all of them
(`MetaStore`), and every backend runs the same contract suite
(tests/metastore/): SQLite (one machine) and PostgreSQL (several).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from zonegate.metastore.models import (
    AclBinding,
    CommittedOffset,
    GroupRecord,
    NodeRecord,
    QuotaEntity,
    ScramRecord,
    ShardOwner,
    TopicInfo,
)
from zonegate.storage.index import GcStore, StreamStore
from zonegate.transactions.metadata import TransactionMetadata, TxnTransit


class ClusterStore(Protocol):
    async def create_topic(
        self, name: str, configs: dict[str, str], leaders: Sequence[int]
    ) -> TopicInfo:
        """One partition per entry of `leaders`, led by that node; TopicExists if a live
        topic has the name."""
        ...

    async def delete_topic(self, name: str) -> TopicInfo | None: ...

    async def add_partitions(
        self, name: str, leaders: Sequence[int], have: int | None = None
    ) -> TopicInfo:
        """Appends one partition per entry of `leaders`; PartitionCountChanged if the
        topic no longer has `have` partitions (another node added some meanwhile)."""
        ...

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo: ...

    async def get_topic(self, name: str) -> TopicInfo | None: ...

    async def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    async def list_topics(self) -> list[TopicInfo]: ...

    async def move_partitions(self, moves: Sequence[tuple[int, int]]) -> None:
        """Sets each (stream id, new leader node), bumping the partition's leader epoch and
        recording where the new epoch starts."""
        ...

    async def reassign_partitions(self, assignments: Sequence[tuple[int, int, int]]) -> None:
        """Sets each (stream id, preferred node, leader node) in one transaction: the
        preferred leader always, the leader as `move_partitions` does where it changes."""
        ...

    async def metadata_version(self) -> int:
        """A number that changes whenever topics, partitions or leaders change."""
        ...

    async def register_node(self, node: NodeRecord, lease_ms: int, now_ms: int) -> bool:
        """Creates or renews the node's row, its lease running to now + lease_ms, and
        answers True; unless the row is live and held by another incarnation of the
        node (another process runs as it), which is left alone: False."""
        ...

    async def expire_node(self, node_id: int, incarnation: int | None = None) -> None:
        """Ends the node's lease now; with `incarnation`, only if that one holds it."""
        ...

    async def list_nodes(self) -> list[NodeRecord]: ...

    async def set_cut_off(self, node_id: int, since_ms: int) -> None:
        """Holds the node cut off from the other zones' nodes since `since_ms` (the
        controller's judgement, router/reachability.py), or no longer with 0; a
        renewal leaves it as it is."""
        ...

    async def acquire_lease(self, name: str, holder: int, ttl_ms: int, now_ms: int) -> bool:
        """Takes or renews lease `name` for `holder` (a node id) if it is free, expired,
        already held, or held by a node whose own lease has ended (it stopped, or was
        found dead: `expire_node`), so that a dead holder's lease is not waited out."""
        ...

    async def get_cluster_configs(self) -> dict[str, dict[str, str]]:
        """The defaults of topic configs set at run time, by topic config name, per
        scope: "" for the cluster's, a node id (as text) for that node's own."""
        ...

    async def set_cluster_configs(
        self, scope: str, changes: dict[str, str | None]
    ) -> dict[str, str]:
        """Sets (a value) or removes (None) defaults of one scope in one transaction, and
        moves the metadata version; returns the scope's after."""
        ...

    async def cluster_secret(self, name: str) -> str:
        """A random secret every node of the cluster reads alike, made on first ask
        (`rpc-token`: what the leader RPC requires of its callers)."""
        ...


class ProducerIds(Protocol):
    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before, cluster-wide."""
        ...

    async def allocate_producer_ids(self, count: int) -> int:
        """The first of `count` consecutive producer ids never handed out before (a
        coordinator's block, as Kafka's ProducerIdManager takes them)."""
        ...


class GroupStore(Protocol):
    async def load_group(self, group_id: str) -> GroupRecord | None: ...

    async def save_group(self, group: GroupRecord) -> None: ...

    async def delete_group(self, group_id: str) -> None:
        """Drops the group's state and every offset it committed."""
        ...

    async def list_groups(self) -> list[GroupRecord]:
        """Every group with state or committed offsets (offsets only: classic, empty state)."""
        ...

    async def commit_offsets(self, group_id: str, offsets: Sequence[CommittedOffset]) -> None: ...

    async def fetch_offsets(self, group_id: str) -> list[CommittedOffset]: ...

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> None: ...


class QuotaStore(Protocol):
    async def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity with a quota set, and its quotas by key."""
        ...

    async def alter_client_quotas(
        self, changes: Sequence[tuple[QuotaEntity, dict[str, float | None]]]
    ) -> None:
        """Sets (a value) or removes (None) quotas, all in one transaction."""
        ...


class ScramStore(Protocol):
    async def scram_credentials(self) -> list[ScramRecord]:
        """Every user's credentials, by user then mechanism."""
        ...

    async def alter_scram_credentials(
        self, upserts: Sequence[ScramRecord], deletions: Sequence[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        """Deletes each (user, mechanism) and sets (inserts or replaces) each credential,
        all in one transaction; returns the deletions that found no credential."""
        ...


class AclStore(Protocol):
    async def acl_version(self) -> int:
        """A number that changes with every change to the ACLs (0: never any)."""
        ...

    async def acls(self) -> tuple[int, list[AclBinding]]:
        """Every ACL, and the version they are as of, read together."""
        ...

    async def create_acls(self, acls: Sequence[AclBinding]) -> None:
        """Adds the ACLs in one transaction; one already there stays (Kafka keeps a set)."""
        ...

    async def delete_acls(self, acls: Sequence[AclBinding]) -> list[AclBinding]:
        """Removes the ACLs in one transaction; returns those that were there."""
        ...


class TransactionStore(Protocol):
    async def txn_shards(self) -> list[ShardOwner]:
        """Every shard ever taken, by shard: its owner and coordinator epoch."""
        ...

    async def shard_epoch(self, shard: int) -> int:
        """The shard's coordinator epoch now (0: never taken)."""
        ...

    async def take_shard(self, shard: int, node_id: int, incarnation: int, seen_epoch: int) -> int:
        """Takes `shard` over for the node: its epoch goes from `seen_epoch` (0: never
        taken) to the next, which is returned; ShardFenced (and nothing written) if the
        epoch is no longer `seen_epoch` (another node took it meanwhile)."""
        ...

    async def load_shard(self, shard: int) -> list[TransactionMetadata]:
        """Every transactional id of the shard, as last written, by id."""
        ...

    async def write_txn(
        self, shard: int, epoch: int, transactional_id: str, transit: TxnTransit
    ) -> None:
        """Writes the id's new state; ShardFenced (nothing written) unless the shard is at
        `epoch`."""
        ...

    async def delete_txn(self, shard: int, epoch: int, transactional_id: str) -> None:
        """Forgets an expired id; ShardFenced (nothing deleted) unless the shard is at
        `epoch`."""
        ...


class PendingOffsetStore(Protocol):
    """Offsets committed in a transaction (TxnOffsetCommit), the group's only once the
    transaction commits (transactions/pending_offsets.py is the rule). Every offset
    commit, plain (`GroupStore.commit_offsets`) or transactional, takes its place in one
    order, and a transaction's commit keeps whichever of the two came later."""

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        offsets_partition: int,
        offsets: Sequence[CommittedOffset],
    ) -> None:
        """Pending under the producer; a later one of the same partition replaces it."""
        ...

    async def complete_txn_offsets(
        self, offsets_partition: int, producer_id: int, commit: bool
    ) -> None:
        """The marker at one `__consumer_offsets` partition: the producer's pending offsets
        of its groups become committed (unless a later plain commit is there) or are
        dropped. Idempotent: a retried marker finds nothing left."""
        ...

    async def pending_offsets(self, group_id: str) -> list[tuple[str, int]]:
        """The group's partitions with an offset pending in some transaction (OffsetFetch's
        `require_stable` answers UNSTABLE_OFFSET_COMMIT for them), by topic, partition."""
        ...


class MetaStore(
    ClusterStore,
    StreamStore,
    ProducerIds,
    GroupStore,
    GcStore,
    QuotaStore,
    ScramStore,
    AclStore,
    TransactionStore,
    PendingOffsetStore,
    Protocol,
):
    """All of a backend's concerns, and its one connection to close."""

    async def close(self) -> None: ...


def open_metastore(url: str) -> MetaStore:
    """`sqlite:///path/to/meta.db` (the embedded default) or
    `postgresql://user:password@host:port/database` (also `postgres://`)."""
    if url.startswith("sqlite://"):
        from zonegate.metastore.sqlite import SqliteMetaStore

        return SqliteMetaStore(url.removeprefix("sqlite://"))
    if url.startswith(("postgresql://", "postgres://")):
        from zonegate.metastore.postgres import PostgresMetaStore

        return PostgresMetaStore(url)
    raise ValueError(
        f"unsupported metadata store URL {url!r}: expected sqlite:///path or "
        "postgresql://user@host/database"
    )
