"""The metadata store protocol: one schema, several backends (SQLite today)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from zonegate.metastore.models import (
    CommittedOffset,
    GroupRecord,
    IndexEntry,
    NodeRecord,
    PartitionCommit,
    PartitionState,
    TopicInfo,
)


class MetaStore(Protocol):
    async def create_topic(
        self, name: str, configs: dict[str, str], leaders: Sequence[int]
    ) -> TopicInfo:
        """One partition per entry of `leaders`, led by that node."""
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

    async def load_partition(self, stream_id: int) -> PartitionState: ...

    async def read_index(self, stream_id: int) -> list[IndexEntry]: ...

    async def epoch_end_offset(self, stream_id: int, epoch: int) -> tuple[int, int] | None:
        """Where leader epoch `epoch` of the stream ended, as Kafka's leader-epoch cache
        answers it: (the newest epoch at or before `epoch`, the first offset of the
        epoch after it); None when no later epoch began.

        Epoch 0 starts at offset 0 with the partition and is not recorded; every leader
        move records its new epoch and the offset it starts at.
        """
        ...

    async def commit_appends(self, commits: Sequence[PartitionCommit]) -> set[int]:
        """Commits all in one transaction; returns the stream ids fenced (epoch moved)."""
        ...

    async def allocate_producer_id(self) -> int: ...

    async def register_node(self, node: NodeRecord, lease_ms: int, now_ms: int) -> None:
        """Creates or renews the node's row, its lease running to now + lease_ms."""
        ...

    async def expire_node(self, node_id: int) -> None: ...

    async def list_nodes(self) -> list[NodeRecord]: ...

    async def acquire_lease(self, name: str, holder: int, ttl_ms: int, now_ms: int) -> bool:
        """Takes or renews lease `name` for `holder` if it is free, expired or already held."""
        ...

    async def cluster_secret(self, name: str) -> str:
        """A random secret every node of the cluster reads alike, made on first ask
        (`rpc-token`: what the leader RPC requires of its callers)."""
        ...

    async def metadata_version(self) -> int:
        """A number that changes whenever topics, partitions or leaders change."""
        ...

    async def move_partitions(self, moves: Sequence[tuple[int, int]]) -> None:
        """Sets each (stream id, new leader node), bumping the partition's leader epoch."""
        ...

    # -- consumer groups and committed offsets ------------------------------
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

    async def close(self) -> None: ...


def open_metastore(url: str) -> MetaStore:
    """`sqlite:///path/to/meta.db` (the embedded default)."""
    if url.startswith("sqlite://"):
        from zonegate.metastore.sqlite import SqliteMetaStore

        return SqliteMetaStore(url.removeprefix("sqlite://"))
    raise ValueError(f"unsupported metadata store URL {url!r}: expected sqlite:///path")
