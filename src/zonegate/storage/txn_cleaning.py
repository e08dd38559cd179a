"""Which transactional batches one cleaning round may drop: Kafka's CleanedTransactionMetadata.

Pure. Kafka's log cleaner (LogCleaner.scala) walks a partition from its log
start in offset order, fed with the partition's aborted-transaction index for
the range (here `aborted_txns`, as the leader keeps it), and decides per batch:

- a data batch of a transaction the index says was aborted may go (its records
  all go; the batch itself stays empty if its producer's state needs it);
- an ABORT marker may go once no batch of its transaction was met in this round
  (they all went in an earlier one); while one was, its index entry is kept;
- a COMMIT marker may go once no batch of its transaction was met in this round;
- a marker that may go is first kept with a delete horizon (`delete.retention.ms`
  from this round), and only dropped by a round at or past it (storage/cleaner.py).

One `CleanedTransactions` is carried across the groups of one round, as Kafka
carries one across the segments it cleans into one; the offset map is built
with a fresh one (aborted records never enter it, so an aborted value never
hides a committed one). `dropped(end)` is what the round leaves out of the
index: the aborted transactions whose markers lie below the round's end and
none of whose batches is left, so a read_committed fetch is never told to skip
a producer's batches that later commit (a client skips a named producer until
it meets an ABORT marker).
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from zonegate.records.batch import BatchHeader
from zonegate.transactions.markers import ABORT, COMMIT
from zonegate.transactions.partition_txns import AbortedTxn

EMPTY = -1  # the type of a control batch with no record left (an earlier round emptied it)
UNKNOWN = -2  # a control record this cleaner does not know: kept, as Kafka keeps it
_KEY = struct.Struct(">hh")  # version, type


def control_type(key: bytes | None) -> int:
    """The type of a control record from its key (Kafka's ControlRecordType.parse)."""
    if key is None or len(key) < _KEY.size:
        return UNKNOWN
    version, kind = _KEY.unpack_from(key)
    return kind if version >= 0 and kind in (ABORT, COMMIT) else UNKNOWN


@dataclass(slots=True)
class _Ongoing:
    txn: AbortedTxn
    observed: bool = False  # a batch of it was met in this round


class CleanedTransactions:
    """The transaction state of one cleaning round, read in offset order."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        # Kafka's min-heap by first offset: an aborted transaction starts to count at
        # its first batch, and ends at its ABORT marker.
        self._pending = [(a.first_offset, a.last_offset, a) for a in aborted]
        heapq.heapify(self._pending)
        self._index = [a for _, _, a in self._pending]
        self._committed: set[int] = set()
        self._aborted: dict[int, _Ongoing] = {}
        self._kept: set[AbortedTxn] = set()

    def _start_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            _, _, a = heapq.heappop(self._pending)
            self._aborted.setdefault(a.producer_id, _Ongoing(a))

    def on_batch(self, h: BatchHeader) -> bool:
        """A data batch met: whether it belongs to an aborted transaction (it may go)."""
        self._start_up_to(h.base_offset + h.last_offset_delta)
        if not h.is_transactional:
            return False
        ongoing = self._aborted.get(h.producer_id)
        if ongoing is not None:
            ongoing.observed = True
            return True
        self._committed.add(h.producer_id)
        return False

    def on_control(self, h: BatchHeader, kind: int) -> bool:
        """A control batch met, of type `kind` (EMPTY when it holds no record): whether
        it may go (after its delete horizon)."""
        self._start_up_to(h.base_offset + h.last_offset_delta)
        if kind == EMPTY:
            return True  # an earlier round emptied it: safe to drop (Kafka)
        if kind == ABORT:
            ongoing = self._aborted.pop(h.producer_id, None)
            if ongoing is not None and ongoing.observed:
                self._kept.add(ongoing.txn)  # its records went this round: the entry stays
                return False
            return True
        if kind == COMMIT:
            if h.producer_id in self._committed:
                self._committed.discard(h.producer_id)
                return False
            return True
        return False

    def dropped(self, end: int) -> list[AbortedTxn]:
        """The index entries this round leaves out: those whose marker lies below `end`
        (every batch of theirs was read) and whose records are all gone."""
        return [a for a in self._index if a.last_offset < end and a not in self._kept]
