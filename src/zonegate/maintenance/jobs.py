"""A node's storage jobs, built and scheduled together.

Retention and compaction (with cleaning) run on every node, for the
partitions it leads; object GC runs on the node holding the controller lease,
every `gc_interval_s`, at once when this node let go of data (retention, a
deleted topic, compaction), and when the first unit waiting out a grace becomes
due. Retention splits the stream object at a partition's head by segment
(maintenance/splitting.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from zonegate.leader_forwarder.leader import LeaderService
from zonegate.maintenance.compaction import CompactionSettings, Compactor
from zonegate.maintenance.gc import GcSettings, ObjectGc
from zonegate.maintenance.retention import Retention
from zonegate.maintenance.splitting import HeadSplitter
from zonegate.maintenance.targets import LedPartitions
from zonegate.metastore.models import TopicInfo
from zonegate.runtime.clock import Clock
from zonegate.runtime.supervisor import Supervisor
from zonegate.storage.index import GcStore, IndexEntry
from zonegate.storage.objects import ObjectStore


@dataclass(frozen=True)
class MaintenanceSettings:
    retention_interval_s: float  # log.retention.check.interval.ms
    compaction_interval_s: float  # --compaction-interval-ms
    gc_interval_s: float  # --gc-interval-ms
    compaction: CompactionSettings
    gc: GcSettings


class StorageMaintenance:
    def __init__(
        self,
        led: LedPartitions,
        leader: LeaderService,
        store: ObjectStore,
        index: GcStore,
        read: Callable[[Sequence[IndexEntry]], Awaitable[list[bytes]]],
        is_controller: Callable[[], bool],
        clock: Clock,
        settings: MaintenanceSettings,
    ) -> None:
        self._leader = leader
        self._is_controller = is_controller
        self._settings = settings
        # Set when this node let go of data (retention, a deleted topic): object GC runs
        # at once, so what it frees waits only its grace, not a GC interval besides.
        self._gc_wake = asyncio.Event()
        self.splitter = HeadSplitter(leader.changes, store, read, led.segmenting)
        self.retention = Retention(
            led.retention_targets,
            leader.changes,
            clock,
            on_dropped=self._gc_wake.set,
            split=self.splitter.split,
        )
        # A WAL object cannot go before the orphan grace since its upload (gc.py):
        # compaction leaves a delete-only topic's ranges in it that long (compaction.py).
        compaction = dataclasses.replace(
            settings.compaction, wal_hold_ms=settings.gc.orphan_grace_ms
        )
        self.compactor = Compactor(
            leader.changes,
            store,
            read,
            led.compaction_targets,
            clock,
            compaction,
            on_rewritten=self._gc_wake.set,
        )
        self.gc = ObjectGc(store, index, clock, settings.gc, led.file_delete_delays)

    def schedule(self, sup: Supervisor) -> None:
        s = self._settings
        sup.every("retention", s.retention_interval_s, self.retention.run_once)
        sup.every("compaction", s.compaction_interval_s, self.compactor.run_once)
        sup.every(
            "object gc",
            s.gc_interval_s,
            self._gc,
            wake=self._gc_wake,
            next_in=self.gc.next_pass_in,
        )

    def on_topic_deleted(self, topic: TopicInfo) -> None:
        """The leader lets go of the topic's partitions, and GC reclaims their objects."""
        self._leader.forget(p.stream_id for p in topic.partitions)
        self._gc_wake.set()

    async def _gc(self) -> None:
        """Object GC, on the one node holding the controller lease."""
        if self._is_controller():
            await self.gc.run_once()
