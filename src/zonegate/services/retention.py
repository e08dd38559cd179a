"""Retention: every partition this node leads keeps what its topic's configs say, no more.

Every `log.retention.check.interval.ms` the node walks the partitions it
leads whose topic's `cleanup.policy` includes `delete`, and has the leader
apply Kafka's rules (storage/segments.py `retention_start`) over the partition's
segments: the log start moves and the index entries wholly below it go, in
one transaction fenced by the leader epoch. Object GC reclaims the objects no
entry names any more (storage/gc.py). docs/storage.md has the design.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from zonegate.leader_forwarder.leader import LeaderService, RetentionRule
from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.storage.index import UnknownStream

log = logging.getLogger(__name__)


@dataclass
class RetentionStats:
    passes: int = 0
    segments_deleted: int = 0
    bytes_deleted: int = 0


class RetentionService:
    def __init__(
        self,
        node_id: int,
        partitions: Callable[[], list[PartitionInfo]],
        topic: Callable[[str], TopicInfo | None],
        config: Callable[[TopicInfo, str], str],
        leader: LeaderService,
        on_dropped: Callable[[], None] | None = None,
    ) -> None:
        self._me = node_id
        self._partitions = partitions
        self._topic = topic
        self._config = config
        self._leader = leader
        self._on_dropped = on_dropped
        self.stats = RetentionStats()

    def rule(self, topic: TopicInfo) -> RetentionRule | None:
        """The topic's retention in force, None when its policy keeps everything."""
        policy = {p.strip() for p in self._config(topic, "cleanup.policy").split(",")}
        if "delete" not in policy:
            return None
        return RetentionRule(
            retention_ms=int(self._config(topic, "retention.ms")),
            retention_bytes=int(self._config(topic, "retention.bytes")),
        )

    async def run_once(self) -> None:
        self.stats.passes += 1
        dropped = False
        for p in self._partitions():
            if p.leader_node != self._me:
                continue
            topic = self._topic(p.topic)
            rule = self.rule(topic) if topic is not None else None
            if rule is None or (rule.retention_ms < 0 and rule.retention_bytes < 0):
                continue
            try:
                segments, size = await self._leader.apply_retention(p.stream_id, rule)
            except UnknownStream:
                continue  # deleted meanwhile
            if segments:
                dropped = True
                self.stats.segments_deleted += segments
                self.stats.bytes_deleted += size
                log.info(
                    "retention of %s-%d dropped %d segments (%d bytes)",
                    p.topic,
                    p.partition,
                    segments,
                    size,
                )
        if dropped and self._on_dropped is not None:
            self._on_dropped()  # object GC may have objects to reclaim now
