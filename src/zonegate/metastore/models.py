"""Records kept in the metadata store, shared by every backend."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic_id: uuid.UUID
    topic: str
    partition: int
    stream_id: int  # unique for the cluster's lifetime; never reused after deletion
    leader_node: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    name: str
    partitions: tuple[PartitionInfo, ...]
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One stored batch (or run of batches) of a partition's stream."""

    base_offset: int
    last_offset: int
    object_key: str
    position: int
    length: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: tuple[ProducerBatch, ...]  # the last five, oldest first

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    stream_id: int
    leader_epoch: int
    log_start_offset: int
    next_offset: int
    producers: dict[int, ProducerEntry]


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    """What one group commit appends to one partition, fenced by `leader_epoch`."""

    stream_id: int
    leader_epoch: int
    next_offset: int
    entries: tuple[IndexEntry, ...]
    producers: tuple[ProducerEntry, ...]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A node's registration: where it serves Kafka and the leader RPC, and its lease."""

    node_id: int
    zone: str
    kafka_host: str
    kafka_port: int
    rpc_host: str
    rpc_port: int
    lease_expires_ms: int = 0

    def live(self, now_ms: int) -> bool:
        return self.lease_expires_ms > now_ms


class MetaStoreError(Exception):
    pass


class TopicExists(MetaStoreError):
    pass


class UnknownStream(MetaStoreError):
    """No partition has this stream id (never had, or its topic was deleted)."""

    def __init__(self, stream_id: int) -> None:
        super().__init__(f"no partition with stream id {stream_id}")
        self.stream_id = stream_id


class PartitionCountChanged(MetaStoreError):
    """Partitions were added by someone else since the caller counted them."""

    def __init__(self, name: str, expected: int, actual: int) -> None:
        super().__init__(f"topic {name!r} has {actual} partitions, not the {expected} counted")
        self.actual = actual


class LeaderEpochFenced(MetaStoreError):
    """A commit named a leader epoch that is no longer the partition's."""

    def __init__(self, stream_id: int, expected: int, actual: int | None) -> None:
        super().__init__(
            f"stream {stream_id}: commit fenced, leader epoch {expected} is not current ({actual})"
        )
        self.stream_id = stream_id


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A consumer group's durable state: its type and the coordinator's JSON snapshot."""

    group_id: str
    group_type: str  # "classic" or "consumer" (KIP-848)
    state: str  # JSON written by the coordinator; opaque to the store


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
