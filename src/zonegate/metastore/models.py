"""Records kept in the metadata store, shared by every backend.

The stream's own records (index entries, producer state, partition state and
commits) are the storage layer's (storage/index.py), which the store keeps.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


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
    # Every Kafka listener's advertised endpoint, (listener name, host, port); empty in
    # rows of a release before listeners: kafka_host:kafka_port is its PLAINTEXT one.
    endpoints: tuple[tuple[str, str, int], ...] = ()
    # The peers this node has been calling for a while without an answer (written with
    # each renewal by the node itself: broker/reachability.py), and since when the
    # controller holds it cut off from the other zones' nodes (0: it does not), so no
    # node gives it partitions or groups to lead (router/reachability.py).
    unreached: tuple[int, ...] = ()
    cut_off_ms: int = 0

    def live(self, now_ms: int) -> bool:
        return self.lease_expires_ms > now_ms

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where clients of `listener` reach this node; None: it has no such listener."""
        if not self.endpoints:
            return (self.kafka_host, self.kafka_port) if listener == "PLAINTEXT" else None
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None

    def leads(self, now_ms: int) -> bool:
        """Whether partitions and groups may be led here: live and not cut off."""
        return self.live(now_ms) and self.cut_off_ms == 0

    def unreached_text(self) -> str:
        """How the stores keep `unreached`: ids separated by commas, "" for none."""
        return ",".join(str(n) for n in self.unreached)

    def endpoints_text(self) -> str:
        """How the stores keep `endpoints`: JSON, "" for none."""
        return json.dumps([list(e) for e in self.endpoints]) if self.endpoints else ""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> NodeRecord:
        """A row of the stores' nodes table, its columns in the fields' order."""
        node_id, zone, kafka_host, kafka_port, rpc_host, rpc_port, expires, inc, text = row[:9]
        unreached, cut_off_ms = row[9:11] if len(row) > 9 else ("", 0)
        endpoints = tuple((str(n), str(h), int(p)) for n, h, p in json.loads(text or "[]"))
        return cls(
            int(node_id),
            str(zone),
            str(kafka_host),
            int(kafka_port),
            str(rpc_host),
            int(rpc_port),
            int(expires),
            int(inc),
            endpoints,
            tuple(int(n) for n in str(unreached).split(",") if n),
            int(cut_off_ms),
        )


class MetaStoreError(Exception):
    pass


class MetaStoreUnavailable(MetaStoreError):
    """The store cannot be reached now (a server down or restarting): retriable."""


class TopicExists(MetaStoreError):
    pass


class ShardFenced(MetaStoreError):
    """A transaction coordinator shard's epoch moved on: another node took the shard over,
    and this one's write was refused (its clients get NOT_COORDINATOR)."""

    def __init__(self, shard: int, epoch: int, current: int | None) -> None:
        super().__init__(f"transaction shard {shard} is at epoch {current}, not {epoch}")
        self.shard = shard
        self.current = current


@dataclass(frozen=True, slots=True)
class ShardOwner:
    """Who coordinates a transaction shard, at which coordinator epoch (`txn_shards`)."""

    shard: int
    epoch: int
    node_id: int
    incarnation: int


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


# -- ACLs ------------------------------------------------------------------------
# Kafka's codes, as the wire and Kafka's tools carry them (org.apache.kafka.common.acl,
# org.apache.kafka.common.resource); the stores keep the codes.
class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL, Kafka's AclBinding: a resource pattern and an access control entry.
    Bindings are values: two equal bindings are one ACL (Kafka keeps a set)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType  # LITERAL or PREFIXED once stored
    principal: str  # "User:alice", or "User:*" for every principal
    host: str  # an address, or "*"
    operation: AclOperation
    permission: AclPermission
