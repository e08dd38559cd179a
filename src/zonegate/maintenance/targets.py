"""What each storage job is told of the partitions this node leads, read from the catalog.

The jobs run for the partitions this node leads (object GC aside: it runs on
the controller, over the whole store). Here each led partition's topic rules,
typed values the catalog parsed when the topic or the defaults last changed
(storage/topic_rules.py), are handed to the job that obeys them: a partition's
segmenting (`segment.ms`, `segment.bytes`: the leader draws segments with it,
compaction cuts chunks by it), a compaction target (with a compacted topic's
cleaning configs), a retention rule (for a topic whose `cleanup.policy`
includes `delete`). No config string is read here, and nothing does I/O.
The lists are kept until the catalog changes (its `changes` count moves): the
jobs ask at every pass, and at 100,000 led partitions building them again costs
more than the pass itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from zonegate.leader_forwarder.partitions import KAFKA_SEGMENTING
from zonegate.maintenance.gc import GcDelays
from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.storage.cleaner import CleanerConfig
from zonegate.storage.topic_rules import RetentionRule, TopicRules

__all__ = [
    "KAFKA_SEGMENTING",
    "LedPartitions",
    "RetentionRule",
    "Target",
    "TopicCatalog",
]


class TopicCatalog(Protocol):
    """What the jobs read of the catalog (services/catalog.py's `Catalog` is one)."""

    @property
    def changes(self) -> int:
        """Counts the catalog's changes: the same count, the same partitions, leaders and
        rules."""
        ...

    def partitions(self) -> list[PartitionInfo]: ...

    def get(self, name: str) -> TopicInfo | None: ...

    def by_stream(self, stream_id: int) -> PartitionInfo | None: ...

    def rules(self, topic: TopicInfo) -> TopicRules:
        """The topic's rules in force, parsed when its configs or the defaults changed."""
        ...


@dataclass(frozen=True, slots=True)
class Target:
    """A partition this node leads, as compaction needs it (one per led partition, kept
    while the catalog stands: slotted, 100,000 of them take 8 MiB, not 13)."""

    stream_id: int
    segment_ms: int
    segment_bytes: int
    cleaning: CleanerConfig | None = None  # a compacted topic's: key-based cleaning
    # A topic deleting by time or size: its retention.ms and retention.bytes (compaction
    # cuts its stream objects by them); -1: no such limit.
    retention_ms: int = -1
    retention_bytes: int = -1


class LedPartitions:
    """The partitions `node_id` leads, as the catalog says now, with their jobs' configs."""

    def __init__(self, catalog: TopicCatalog, node_id: int) -> None:
        self._catalog = catalog
        self._me = node_id
        # (the catalog's change count, the lists as of it)
        self._compaction: tuple[int, list[Target]] | None = None
        self._retention: tuple[int, list[tuple[PartitionInfo, RetentionRule]]] | None = None

    def _led(self) -> list[tuple[PartitionInfo, TopicRules | None]]:
        out = []
        for p in self._catalog.partitions():
            if p.leader_node == self._me:
                topic = self._catalog.get(p.topic)
                out.append((p, self._catalog.rules(topic) if topic is not None else None))
        return out

    def segmenting(self, stream_id: int) -> tuple[int, int]:
        """(segment.ms, segment.bytes) in force for the partition's topic."""
        p = self._catalog.by_stream(stream_id)
        topic = self._catalog.get(p.topic) if p is not None else None
        if topic is None:
            return KAFKA_SEGMENTING
        return self._catalog.rules(topic).segmenting

    def compaction_targets(self) -> list[Target]:
        """Every led partition, with its topic's segmenting, and a compacted topic's
        cleaning configs (the same list, and Targets, until the catalog changes)."""
        version = self._catalog.changes
        if self._compaction is None or self._compaction[0] != version:
            self._compaction = (version, self._compaction_targets())
        return self._compaction[1]

    def _compaction_targets(self) -> list[Target]:
        out = []
        for p, rules in self._led():
            if rules is None:  # the topic went meanwhile: compacted by Kafka's defaults
                out.append(Target(p.stream_id, *KAFKA_SEGMENTING))
            else:
                r = rules.retention
                limits = (r.retention_ms, r.retention_bytes) if r is not None else (-1, -1)
                out.append(Target(p.stream_id, *rules.segmenting, rules.cleaning, *limits))
        return out

    def file_delete_delays(self, node_ms: int) -> GcDelays:
        """Each partition's `file.delete.delay.ms` (every topic's, led or not: object
        GC runs over the whole store), `node_ms` where none is set; WAL objects, which
        mix topics, get the longest."""
        by_stream: dict[int, int] = {}
        for p in self._catalog.partitions():
            topic = self._catalog.get(p.topic)
            delay = self._catalog.rules(topic).file_delete_delay_ms if topic else None
            by_stream[p.stream_id] = node_ms if delay is None else delay
        return GcDelays(by_stream, max(by_stream.values(), default=node_ms))

    def retention_targets(self) -> list[tuple[PartitionInfo, RetentionRule]]:
        """The led partitions whose topics delete by retention, with their rules (the same
        list until the catalog changes)."""
        version = self._catalog.changes
        if self._retention is None or self._retention[0] != version:
            self._retention = (version, self._retention_targets())
        return self._retention[1]

    def _retention_targets(self) -> list[tuple[PartitionInfo, RetentionRule]]:
        return [
            (p, rules.retention)
            for p, rules in self._led()
            if rules is not None and rules.retention is not None
        ]
