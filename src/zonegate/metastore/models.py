"""Records kept in the metadata store, shared by every backend.

The stream's own records (index entries, producer state, partition state and
commits) are the storage layer's (storage/index.py), which the store keeps.
"""

from __future__ import annotations

import json
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
    # The partition's one assigned replica, Kafka's preferred leader (the first of its
    # replica list): where it was placed or reassigned. The leader differs from it after
    # a failover or a hand-over until the preferred node leads again (router/balance.py).
    # -1 in rows written before it was kept: the leader.
    preferred_node: int = -1

    @property
    def preferred(self) -> int:
        return self.leader_node if self.preferred_node < 0 else self.preferred_node


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    name: str
    partitions: tuple[PartitionInfo, ...]
    configs: dict[str, str] = field(default_factory=dict)


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
    # Which start of the node process holds the lease: a new one each start, so a
    # process that lost its lease (a zombie) can never renew it as the node it was.
    incarnation: int = 0

    def live(self, now_ms: int) -> bool:
        return self.lease_expires_ms > now_ms


class MetaStoreError(Exception):
    pass


class MetaStoreUnavailable(MetaStoreError):
    """The store cannot be reached now (a server down or restarting): retriable."""


class TopicExists(MetaStoreError):
    pass


class PartitionCountChanged(MetaStoreError):
    """Partitions were added by someone else since the caller counted them."""

    def __init__(self, name: str, expected: int, actual: int) -> None:
        super().__init__(f"topic {name!r} has {actual} partitions, not the {expected} counted")
        self.actual = actual


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A consumer group's durable state: its type and the coordinator's JSON snapshot."""

    group_id: str
    group_type: str  # "classic" or "consumer" (KIP-848)
    state: str  # JSON written by the coordinator; opaque to the store


@dataclass(frozen=True, slots=True)
class ScramRecord:
    """One user's SCRAM credential for one mechanism, as KIP-554 keeps it: the salt,
    the iteration count and the two keys derived from the salted password, never the
    password itself (AlterUserScramCredentials)."""

    user: str
    mechanism: str  # "SCRAM-SHA-256" or "SCRAM-SHA-512"
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int


# A client quota's entity: (type, name) pairs sorted by type, the type "user" or
# "client-id", the name None for the default (qos/client_quotas.py).
QuotaEntity = tuple[tuple[str, str | None], ...]


def quota_entity_key(entity: QuotaEntity) -> str:
    """How the stores keep an entity: one text, the same for the same entity."""
    return json.dumps([[t, n] for t, n in sorted(entity)], separators=(",", ":"))


def quota_entity_from_key(key: str) -> QuotaEntity:
    return tuple(sorted((str(t), None if n is None else str(n)) for t, n in json.loads(key)))
