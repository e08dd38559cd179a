"""A partition's stream: where its batches are, and the store that keeps that durable.

`IndexEntry` says where one stored batch (or run of batches) of a partition
lies: offsets, object key, position, length, max timestamp. `StreamIndex` is a
partition's entries in offset order with the lookups every reader needs (by
offset, by timestamp, the largest timestamp). `StreamStore` is what the
storage layer asks of a durable store for them (the metadata store implements
it): the partition's state, its entries, and the group commit that appends
entries and producer state in one transaction fenced by leader epoch.
Producer state rides in the same commit because idempotence must move exactly
with the offsets it vouches for; so do a producer's transaction columns and the
aborted-transaction index (docs/transactions.md), which read_committed fetches are
answered from.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from zonegate.transactions.partition_txns import AbortedTxn


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One stored batch (or run of batches) of a partition's stream."""

    base_offset: int
    last_offset: int
    object_key: str
    position: int
    length: int
    max_timestamp: int
    # The leader's clock at the commit (ms); 0 for entries of a store made before it was
    # kept. Segments for retention are drawn by it (`StreamIndex.segments`).
    append_ms: int = 0

    @property
    def window_ms(self) -> int:
        """The time the entry is placed in a segment window by (retention's segments,
        compaction's runs, a stream object's chunks, one rule for all three): the leader's
        commit time, or for an entry stored before that was kept, its batches' largest
        timestamp."""
        return self.append_ms or self.max_timestamp


# An entry's fields in order. The metadata stores' columns and the leader RPC's
# message fields carry the same names, so rows and messages convert by them.
INDEX_ENTRY_FIELDS: Final = (
    "base_offset",
    "last_offset",
    "object_key",
    "position",
    "length",
    "max_timestamp",
    "append_ms",
)
_entry_values = operator.attrgetter(*INDEX_ENTRY_FIELDS)


def entry_values(e: object) -> tuple[int, int, str, int, int, int, int]:
    """The values of an entry, or of anything with its fields (a row, a message), in
    the order of INDEX_ENTRY_FIELDS: `IndexEntry(*entry_values(x))` rebuilds one."""
    values: tuple[int, int, str, int, int, int, int] = _entry_values(e)
    return values


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
    # Transactions: the coordinator epoch of the producer's last marker here (-1: none),
    # and the first offset of its transaction open here (None: none open).
    coordinator_epoch: int = -1
    txn_first_offset: int | None = None
    # Kept in memory only (-1 once loaded: unknown): the largest timestamp of its last
    # batch or marker (DescribeProducers' lastTimestamp, as Kafka), and the leader's clock
    # at that append (producer.id.expiration.ms). Not part of a row's identity.
    last_timestamp: int = field(default=-1, compare=False)
    last_ms: int = field(default=-1, compare=False)

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
    # The aborted-transaction index from the log start on, by the abort marker's offset.
    aborted: tuple[AbortedTxn, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    """What one group commit appends to one partition, fenced by `leader_epoch`."""

    stream_id: int
    leader_epoch: int
    next_offset: int
    entries: tuple[IndexEntry, ...]
    producers: tuple[ProducerEntry, ...]
    aborted: tuple[AbortedTxn, ...] = ()  # index entries the cycle's abort markers add


class UnknownStream(LookupError):
    """No partition has this stream id (never had, or its topic was deleted)."""

    def __init__(self, stream_id: int) -> None:
        super().__init__(f"no partition with stream id {stream_id}")
        self.stream_id = stream_id


class StreamStore(Protocol):
    """The durable side of partitions' streams (the metadata store implements it)."""

    async def load_partition(self, stream_id: int) -> PartitionState:
        """Raises UnknownStream for a stream id no partition has."""
        ...

    async def read_index(self, stream_id: int) -> list[IndexEntry]: ...

    async def epoch_end_offset(self, stream_id: int, epoch: int) -> tuple[int, int] | None:
        """Where leader epoch `epoch` of the stream ended, as Kafka's leader-epoch cache
        answers it: (the newest epoch at or before `epoch`, the first offset of the
        epoch after it); None when no later epoch began.

        Epoch 0 starts at offset 0 with the partition and is not recorded; every leader
        move records its new epoch and the offset it starts at.
        """
        ...

    async def commit_appends(self, commits: Sequence[PartitionCommit]) -> set[int]:
        """Commits all in one transaction; returns the stream ids fenced (epoch moved)."""
        ...

    async def read_entries(
        self, stream_id: int, offset: int, *, to_offset: int | None = None, limit: int = 500
    ) -> list[IndexEntry]:
        """Entries in offset order from the one holding `offset` (or the first after it),
        up to the one holding `to_offset` when given, at most `limit`: through the
        primary key, O(log n) however long the partition."""
        ...

    async def entries_at_time(
        self, stream_id: int, timestamp: int, from_offset: int, to_offset: int, limit: int = 4
    ) -> list[IndexEntry]:
        """The first entries (offset order, at most `limit`) between the offsets whose max
        timestamp reaches `timestamp`."""
        ...

    async def newest_entry(
        self, stream_id: int, from_offset: int, to_offset: int
    ) -> IndexEntry | None:
        """The first entry between the offsets with the largest max timestamp."""
        ...

    async def replace_entries(
        self,
        stream_id: int,
        leader_epoch: int,
        old: Sequence[IndexEntry],
        new: Sequence[IndexEntry],
        *,
        drop_aborted: Sequence[int] = (),
    ) -> bool:
        """Swaps entries `old` for `new` (the same offsets, rewritten elsewhere) in one
        transaction fenced by `leader_epoch`. False, and nothing changed, when any of
        `old` is no longer there (retention or DeleteRecords removed it meanwhile); new
        entries wholly below the log start are not written. `drop_aborted`: the marker
        offsets of aborted transactions to delete in the same transaction (cleaning
        removed their records). Raises UnknownStream and LeaderEpochFenced as
        truncate_head does."""
        ...

    async def truncate_head(self, stream_id: int, leader_epoch: int, log_start: int) -> int:
        """Moves the stream's log start offset up to `log_start` (never down) and deletes
        the entries (and aborted transactions) wholly below it, in one transaction fenced
        by `leader_epoch`;
        returns the log start offset now. Raises UnknownStream for an unknown stream and
        LeaderEpochFenced when the epoch moved (nothing changed)."""
        ...


class GcStore(Protocol):
    """What object GC (maintenance/gc.py) asks of the index store (the metadata store
    implements it)."""

    async def referenced_units(self, units: Mapping[str, tuple[str, str] | None]) -> set[str]:
        """Those of `units` some index entry names. `units` maps a unit's key to the
        half-open range `[first, end)` its member objects' keys lie in, in code-point
        order, or None (a unit of one object): an entry names the unit by its key or
        by a key in that range (the object store says which: `DeletionUnit`)."""
        ...

    async def gc_pending(self) -> dict[str, tuple[int, int]]:
        """Units seen unreferenced: unit -> (first seen, ms; size, bytes)."""
        ...

    async def update_gc_pending(
        self, add: dict[str, tuple[int, int]], remove: Iterable[str]
    ) -> None: ...


class LeaderEpochFenced(Exception):
    """A write named a leader epoch that is no longer the partition's: nothing changed."""

    def __init__(self, stream_id: int, expected: int, actual: int | None) -> None:
        super().__init__(f"stream {stream_id}: leader epoch {expected} is not current ({actual})")
        self.stream_id = stream_id


class StreamIndex:
    """A partition's index entries in offset order, with the readers' lookups."""

    __slots__ = ("_bases", "_entries")

    def __init__(self, entries: Iterable[IndexEntry] = ()) -> None:
        self._entries: list[IndexEntry] = list(entries)
        self._bases = [e.base_offset for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def first_offset(self) -> int | None:
        return self._bases[0] if self._bases else None

    def extend(self, entries: Sequence[IndexEntry]) -> None:
        """Appends entries that follow the last one."""
        self._entries.extend(entries)
        self._bases.extend(e.base_offset for e in entries)

    def from_offset(self, offset: int, max_bytes: int) -> list[IndexEntry]:
        """Entries from the one holding `offset`, up to `max_bytes` (at least one)."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        out: list[IndexEntry] = []
        total = 0
        entries = self._entries
        while i < len(entries):
            e = entries[i]
            if out and total + e.length > max_bytes:
                break
            if e.last_offset >= offset:
                out.append(e)
                total += e.length
            i += 1
        return out

    def from_timestamp(self, timestamp: int) -> list[IndexEntry]:
        """Entries from the first whose max timestamp reaches `timestamp`, in offset order."""
        for i, e in enumerate(self._entries):
            if e.max_timestamp >= timestamp:
                return self._entries[i:]
        return []

    def max_timestamp_entry(self) -> IndexEntry | None:
        """The entry holding the largest timestamp (the first such, on a tie)."""
        best: IndexEntry | None = None
        for e in self._entries:
            if best is None or e.max_timestamp > best.max_timestamp:
                best = e
        return best

    def stored_bytes(self) -> int:
        return sum(e.length for e in self._entries)

    def entries(self) -> list[IndexEntry]:
        return list(self._entries)

    def drop_before(self, offset: int) -> int:
        """Drops the entries wholly below `offset`; how many it dropped."""
        n = 0
        while n < len(self._entries) and self._entries[n].last_offset < offset:
            n += 1
        if n:
            del self._entries[:n]
            del self._bases[:n]
        return n
