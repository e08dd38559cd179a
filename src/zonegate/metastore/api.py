"""The metadata store protocol: one schema, several backends (SQLite today)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from zonegate.metastore.models import (
    IndexEntry,
    PartitionCommit,
    PartitionState,
    TopicInfo,
)


class MetaStore(Protocol):
    async def create_topic(
        self, name: str, num_partitions: int, configs: dict[str, str], leader_node: int
    ) -> TopicInfo: ...

    async def delete_topic(self, name: str) -> TopicInfo | None: ...

    async def add_partitions(self, name: str, total: int, leader_node: int) -> TopicInfo: ...

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo: ...

    async def get_topic(self, name: str) -> TopicInfo | None: ...

    async def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    async def list_topics(self) -> list[TopicInfo]: ...

    async def load_partition(self, stream_id: int) -> PartitionState: ...

    async def read_index(self, stream_id: int) -> list[IndexEntry]: ...

    async def commit_appends(self, commits: Sequence[PartitionCommit]) -> set[int]:
        """Commits all in one transaction; returns the stream ids fenced (epoch moved)."""
        ...

    async def allocate_producer_id(self) -> int: ...

    async def close(self) -> None: ...


def open_metastore(url: str) -> MetaStore:
    """`sqlite:///path/to/meta.db` (the embedded default)."""
    if url.startswith("sqlite://"):
        from zonegate.metastore.sqlite import SqliteMetaStore

        return SqliteMetaStore(url.removeprefix("sqlite://"))
    raise ValueError(f"unsupported metadata store URL {url!r}: expected sqlite:///path")
