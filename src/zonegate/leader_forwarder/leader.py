"""The leader of a set of partitions: the one object the node, the RPC server and the
leader directory hold.

Each idea lives in a module of its own, over the partitions' state
(partitions.py: loaded once, dropped when a partition moves):

- sequencer.py: appends get offsets, checked for idempotence, leader epochs and
  the partition's transaction rules, group-committed in one transaction fenced by
  leader epoch (txn_verify.py: KIP-890's verification before the cycle);
- index_reads.py: entries by offset and by time, offsets, high-watermark
  watches;
- log_changes.py: the log start moved (DeleteRecords, retention) and entries
  swapped for their rewrite (compaction, cleaning), with the views the
  storage jobs (maintenance/) decide on; the jobs hold it directly
  (`LeaderService.changes`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.index_reads import IndexReads
from zonegate.leader_forwarder.log_changes import LogChanges
from zonegate.leader_forwarder.messages import (
    ActiveProducer,
    AppendBatch,
    AppendResult,
    ReadIndexResult,
)
from zonegate.leader_forwarder.partitions import PartitionStates
from zonegate.leader_forwarder.sequencer import Sequencer
from zonegate.leader_forwarder.txn_verify import TxnCoordinators, TxnVerifier
from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.storage.index import IndexEntry, StreamStore
from zonegate.transactions.metadata import TopicPartition
from zonegate.transactions.partition_txns import PartitionTxns


class LeaderService:
    def __init__(
        self,
        metastore: StreamStore,
        clock: Clock = SYSTEM_CLOCK,
        segmenting: Callable[[int], tuple[int, int]] | None = None,
        leads: Callable[[int], int | None] | None = None,
    ) -> None:
        """`segmenting`: stream id -> (segment.ms, segment.bytes) of its topic now;
        `leads`: stream id -> the leader epoch at which the node's catalog says this
        node leads it, else None (reads are served only then: partitions.py)."""
        self._clock = clock
        self._partitions = PartitionStates(metastore, segmenting, leads)
        self._sequencer = Sequencer(self._partitions, metastore, clock)
        self._reads = IndexReads(self._partitions, metastore)
        self._changes = LogChanges(self._partitions, metastore)

    def use_transactions(
        self,
        coordinators: TxnCoordinators,
        partition_of: Callable[[int], TopicPartition | None],
        refresh: Callable[[], Awaitable[object]] | None = None,
        *,
        verification: bool | Callable[[], bool] = True,
    ) -> None:
        """The transaction coordinators a transaction's first batch at a partition is
        verified with (txn_verify.py); `partition_of`: stream id -> (topic, partition),
        read again after `refresh` when it does not know the stream; `verification`:
        transaction.partition.verification.enable, or what gives it as in force now."""
        enabled = verification if callable(verification) else lambda: verification
        self._sequencer.verifier = TxnVerifier(
            self._partitions, coordinators, partition_of, refresh, enabled=enabled
        )

    @property
    def commit_cycles(self) -> int:
        return self._sequencer.commit_cycles

    @property
    def fenced_commits(self) -> int:
        """Partitions' commits fenced by a moved leader epoch since the node started."""
        return self._sequencer.fenced_commits

    @property
    def changes(self) -> LogChanges:
        """The fenced log changes and their views, which the storage jobs (maintenance/)
        hold directly: the leader's contract and its RPCs carry only DeleteRecords."""
        return self._changes

    # -- partition state ------------------------------------------------------
    def forget(self, stream_ids: Iterable[int]) -> None:
        """Drops cached state (partition deleted or moved); the next use reloads it."""
        self._partitions.forget(stream_ids)

    def forget_unless_at(self, epochs: Mapping[int, int]) -> None:
        """Drops the state of each partition not held at the given leader epoch."""
        self._partitions.forget_unless_at(epochs)

    def lso_lags(self) -> dict[int, int]:
        """Per partition held with a transaction open: high watermark - LSO."""
        return self._partitions.lso_lags()

    def stored_bytes(self) -> int:
        """Bytes of stored batches of the partitions this leader holds."""
        return self._partitions.stored_bytes()

    async def partition_bytes(self, stream_id: int) -> int:
        """Bytes of the stored batches of one led partition, from its segments' summary
        (loaded from the store if not held; UnknownStream if it has none)."""
        return (await self._partitions.get(stream_id)).summary.total_bytes

    async def transactions(self, stream_id: int) -> PartitionTxns:
        """The partition's transaction state as committed (open transactions, the last
        stable offset, the aborted index): DescribeProducers and read_committed reads."""
        return (await self._partitions.get(stream_id)).txns

    async def producers(self, stream_id: int) -> list[ActiveProducer]:
        """The producers a led partition remembers (DescribeProducers); NotLeading when
        this node does not lead it, UnknownStream when no partition has the stream."""
        p = await self._partitions.led(stream_id)
        txns = p.txns.producers
        answer = []
        for pid, e in sorted(p.producers.items()):
            t = txns.get(pid)
            first = None if t is None else t.txn_first_offset
            answer.append(
                ActiveProducer(
                    pid,
                    e.epoch if t is None else max(e.epoch, t.epoch),
                    e.last_seq,
                    e.last_timestamp,
                    -1 if t is None else t.coordinator_epoch,
                    -1 if first is None else first,
                )
            )
        return answer

    async def expire_producers(self, expiration_ms: int) -> None:
        """producer.id.expiration.ms: forgets the idle producers of the partitions held
        (run every producer.id.expiration.check.interval.ms on the node's clock)."""
        self._partitions.expire_producers(self._clock.wall_ms(), expiration_ms)

    # -- appends (sequencer.py) ------------------------------------------------
    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        return await self._sequencer.append(batches)

    # -- reads (index_reads.py) --------------------------------------------------
    async def read_index(
        self, stream_id: int, offset: int, max_bytes: int, read_committed: bool = False
    ) -> ReadIndexResult:
        return await self._reads.read_index(stream_id, offset, max_bytes, read_committed)

    async def stable_offset(self, stream_id: int) -> int:
        return await self._reads.stable_offset(stream_id)

    async def offsets(self, stream_id: int) -> tuple[int, int, int]:
        """(log start offset, high watermark, leader epoch)."""
        return await self._reads.offsets(stream_id)

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]:
        return await self._reads.entries_from_timestamp(stream_id, timestamp)

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None:
        return await self._reads.max_timestamp_entry(stream_id)

    async def changed(self, stream_id: int) -> asyncio.Future[None]:
        return await self._reads.changed(stream_id)

    # -- the log start, and rewrites (log_changes.py) -------------------------------
    async def delete_records(self, stream_id: int, offset: int) -> tuple[ErrorCode, int]:
        return await self._changes.delete_records(stream_id, offset)
