"""Retention: every partition this node leads keeps what its topic's configs say, no more.

Policy: `retention_start`, Kafka's two rules over a partition's segments (as
storage/segments.py draws them), pure. Execution: every
`log.retention.check.interval.ms` the node walks the partitions it leads whose
topic's `cleanup.policy` includes `delete` (maintenance/targets.py), reads
each one's segments from its leader, and where the policy moves the start,
has the leader move it (`LogChanges.truncate`): the log start moves and
the index entries wholly below it go, in one transaction fenced by the leader
epoch. When the start moved, the stream object now holding it is split by
segment (maintenance/splitting.py), so the next segments dropped free their
bytes one by one. Object GC reclaims the objects no entry names any more
(maintenance/gc.py). docs/storage.md has the design.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from zonegate.leader_forwarder.log_changes import LogChanges
from zonegate.maintenance.targets import RetentionRule
from zonegate.metastore.models import PartitionInfo
from zonegate.runtime.clock import Clock
from zonegate.storage.index import UnknownStream

log = logging.getLogger(__name__)


class SegmentLike(Protocol):
    @property
    def base_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def bytes(self) -> int: ...

    @property
    def max_timestamp(self) -> int: ...


def retention_start(
    segments: Sequence[SegmentLike],
    log_end: int,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
) -> int | None:
    """Where the log should start after Kafka's retention over `segments` (oldest
    first): the oldest segments go while their newest record is older than
    `retention_ms`, then while the partition without them would still hold at least
    `retention_bytes`; -1 turns either rule off. None when nothing goes. All segments
    going moves the start to `log_end` (Kafka rolls and deletes the active segment)."""
    keep = 0
    if retention_ms >= 0:
        while keep < len(segments) and segments[keep].max_timestamp < now_ms - retention_ms:
            keep += 1
    if retention_bytes >= 0:
        left = sum(s.bytes for s in segments[keep:])
        while keep < len(segments) and left - segments[keep].bytes >= retention_bytes:
            left -= segments[keep].bytes
            keep += 1
    if keep == 0:
        return None
    return segments[keep].base_offset if keep < len(segments) else log_end


@dataclass
class RetentionStats:
    passes: int = 0
    segments_deleted: int = 0
    bytes_deleted: int = 0
    split_failures: int = 0


class Retention:
    def __init__(
        self,
        targets: Callable[[], list[tuple[PartitionInfo, RetentionRule]]],
        changes: LogChanges,
        clock: Clock,
        on_dropped: Callable[[], None] | None = None,
        split: Callable[[int], Awaitable[int]] | None = None,
    ) -> None:
        self._targets = targets
        self._changes = changes
        self._clock = clock
        self._on_dropped = on_dropped
        # Splits the object holding a stream's log start by segment (maintenance/
        # splitting.py); None: objects go only when wholly dropped.
        self._split = split
        self._split_again: set[int] = set()  # streams whose last split failed
        self.stats = RetentionStats()

    async def run_once(self) -> None:
        self.stats.passes += 1
        dropped = False
        for p, rule in self._targets():
            try:
                segments, size = await self._apply(p.stream_id, rule)
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
            if segments or p.stream_id in self._split_again:
                await self._split_head(p.stream_id)
        if dropped and self._on_dropped is not None:
            self._on_dropped()  # object GC may have objects to reclaim now

    async def _split_head(self, stream_id: int) -> None:
        """The start moved: the object now holding it frees the next segments one by one."""
        if self._split is None:
            return
        self._split_again.discard(stream_id)
        try:
            await self._split(stream_id)
        except UnknownStream:
            pass  # deleted meanwhile
        except Exception:
            # Nothing was swapped: the objects it uploaded are deleted or orphans for GC.
            self.stats.split_failures += 1
            self._split_again.add(stream_id)
            log.exception("splitting the head object of stream %d failed", stream_id)

    async def _apply(self, stream_id: int, rule: RetentionRule) -> tuple[int, int]:
        """The segments and bytes the partition's retention dropped now."""
        head = await self._changes.head(stream_id)
        start = retention_start(
            head.segments,
            head.high_watermark,
            self._clock.wall_ms(),
            rule.retention_ms,
            rule.retention_bytes,
        )
        if start is None or start <= head.log_start_offset:
            return 0, 0
        if not await self._changes.truncate(stream_id, head.leader_epoch, start):
            return 0, 0  # no longer led at that epoch; the next pass decides again
        gone = [s for s in head.segments if s.last_offset < start]
        return len(gone), sum(s.bytes for s in gone)
