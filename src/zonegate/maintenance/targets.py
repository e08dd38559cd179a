"""What each storage job is told of the partitions this node leads, read from the catalog.

The jobs run for the partitions this node leads (object GC aside: it runs on
the controller, over the whole store). Here the catalog's topic configs are
read, by Kafka name, into the values each job's policy takes: a partition's
segmenting (`segment.ms`, `segment.bytes`: the leader draws segments with it,
compaction cuts chunks by it), a compaction target (with a compacted topic's
cleaning configs), a retention rule (for a topic whose `cleanup.policy`
includes `delete`). Nothing here does I/O.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

from zonegate.leader_forwarder.partitions import KAFKA_SEGMENTING
from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.storage.cleaner import CleanerConfig, is_compacted


class TopicCatalog(Protocol):
    """What the jobs read of the catalog (services/catalog.py's `Catalog` is one)."""

    def partitions(self) -> list[PartitionInfo]: ...

    def get(self, name: str) -> TopicInfo | None: ...

    def by_stream(self, stream_id: int) -> PartitionInfo | None: ...

    def config(self, topic: TopicInfo, name: str) -> str:
        """The value in force of topic config `name` (Kafka's name)."""
        ...


@dataclass(frozen=True)
class Target:
    """A partition this node leads, as compaction needs it."""

    stream_id: int
    segment_ms: int
    segment_bytes: int
    cleaning: CleanerConfig | None = None  # a compacted topic's: key-based cleaning


@dataclass(frozen=True, slots=True)
class RetentionRule:
    """A topic's retention configs in force (Kafka's meanings; -1 turns a limit off)."""

    retention_ms: int
    retention_bytes: int


def retention_rule(topic: TopicInfo, catalog: TopicCatalog) -> RetentionRule | None:
    """The topic's retention in force, None when it keeps everything: its policy has
    no `delete`, or both limits are off."""
    policy = {p.strip() for p in catalog.config(topic, "cleanup.policy").split(",")}
    if "delete" not in policy:
        return None
    rule = RetentionRule(
        retention_ms=int(catalog.config(topic, "retention.ms")),
        retention_bytes=int(catalog.config(topic, "retention.bytes")),
    )
    return None if rule.retention_ms < 0 and rule.retention_bytes < 0 else rule


class LedPartitions:
    """The partitions `node_id` leads, as the catalog says now, with their jobs' configs."""

    def __init__(self, catalog: TopicCatalog, node_id: int) -> None:
        self._catalog = catalog
        self._me = node_id

    def _led(self) -> list[tuple[PartitionInfo, TopicInfo | None]]:
        return [
            (p, self._catalog.get(p.topic))
            for p in self._catalog.partitions()
            if p.leader_node == self._me
        ]

    def segmenting(self, stream_id: int) -> tuple[int, int]:
        """(segment.ms, segment.bytes) in force for the partition's topic."""
        p = self._catalog.by_stream(stream_id)
        topic = self._catalog.get(p.topic) if p is not None else None
        if topic is None:
            return KAFKA_SEGMENTING
        config = self._catalog.config
        return int(config(topic, "segment.ms")), int(config(topic, "segment.bytes"))

    def compaction_targets(self) -> list[Target]:
        """Every led partition, with its topic's segmenting, and a compacted topic's
        cleaning configs."""
        out = []
        config = self._catalog.config
        for p, topic in self._led():
            cleaning = None
            if topic is not None and is_compacted(config(topic, "cleanup.policy")):
                cleaning = CleanerConfig.of(functools.partial(config, topic))
            out.append(Target(p.stream_id, *self.segmenting(p.stream_id), cleaning))
        return out

    def retention_targets(self) -> list[tuple[PartitionInfo, RetentionRule]]:
        """The led partitions whose topics delete by retention, with their rules."""
        out = []
        for p, topic in self._led():
            rule = retention_rule(topic, self._catalog) if topic is not None else None
            if rule is not None:
                out.append((p, rule))
        return out
