"""A partition's transaction rules, as its leader applies them (Kafka's ProducerStateManager,
ProducerAppendInfo and the verification guard of KIP-890 part 1), without I/O.

Per producer the leader keeps its epoch, the coordinator epoch of its last marker
and the first offset of its open transaction here; per partition, the open
transactions (whose earliest first offset is the last stable offset) and the
index of aborted transactions that read_committed fetches are answered from.

The leader sequences a cycle of appends against a `TxnCycle` (a tentative copy, like
the sequencer's), commits the cycle's index entries, and only then `apply`s it: a
cycle that fails to commit leaves the partition as it was. A transactional batch
that would start a transaction here is taken only with the guard of a verification
begun before the cycle (`begin_verification`, then AddPartitionsToTxn's verify-only
form to the coordinator): a marker written meanwhile drops the guard, so a stale
"verified" can never open a transaction the coordinator has already ended (Kafka's
ABA case in UnifiedLog.append).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from zonegate.transactions.states import NO_PRODUCER_EPOCH

E = ErrorCode
_guards = itertools.count(1)  # verification guards are unique for the process's life
# The guard of a batch taken without verification: transaction.partition.verification.
# enable=false, for Produce v11 and older (Kafka's SENTINEL guard with verification off).
UNVERIFIED = 0


@dataclass(frozen=True, slots=True)
class ProducerTxn:
    """What a partition remembers of one producer's transactions (persisted with the
    producer state: two more columns, `coordinator_epoch` and `txn_first_offset`)."""

    producer_id: int
    epoch: int
    coordinator_epoch: int = -1
    txn_first_offset: int | None = None  # the first offset of its open transaction here
    last_ms: int = -1  # the time of its last batch or marker (expiry, DescribeProducers)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of the aborted-transaction index (Kafka's .txnindex AbortedTxn):
    `last_offset` is the abort marker's offset, `last_stable_offset` the LSO once it was
    written."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class Verification:
    """A verification begun for a producer with no open transaction here (Kafka's
    VerificationStateEntry): its unique guard, the lowest sequence seen meanwhile, and
    the epoch asked for."""

    guard: int
    lowest_seq: int
    epoch: int
    started_ms: int


@dataclass(frozen=True, slots=True)
class MarkerWritten:
    error: ErrorCode
    aborted: AbortedTxn | None = None  # the index entry an abort of a non-empty txn adds


@dataclass(slots=True)
class PartitionTxns:
    producers: dict[int, ProducerTxn] = field(default_factory=dict)
    aborted: list[AbortedTxn] = field(default_factory=list)  # by last_offset
    verifications: dict[int, Verification] = field(default_factory=dict)

    @classmethod
    def load(cls, producers: Iterable[ProducerTxn], aborted: Iterable[AbortedTxn]) -> PartitionTxns:
        """A partition's state as a new leader reads it from the metadata store."""
        return cls({p.producer_id: p for p in producers}, sorted(aborted, key=_by_last))

    # -- what reads ask -------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        firsts = [p.txn_first_offset for p in self.producers.values()]
        return min((f for f in firsts if f is not None), default=None)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: below it every transaction is decided; read_committed reads up to it,
        ListOffsets answers it for the latest offset under read_committed."""
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_in_range(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of [fetch_offset, upper_offset)
        must name: those whose span meets the range (Kafka's collectAbortedTxns)."""
        i = bisect.bisect_left(self.aborted, fetch_offset, key=lambda a: a.last_offset)
        return [a for a in self.aborted[i:] if a.first_offset < upper_offset]

    def read_committed(
        self, spans: Sequence[tuple[int, int]], fetch_offset: int, high_watermark: int
    ) -> tuple[int, int, list[AbortedTxn]]:
        """A read_committed fetch over index entries `spans` ((base, last) offsets, in
        order, from the fetch offset): how many of them to answer (those below the LSO:
        a transaction's first batch starts the unstable range, so no entry straddles it),
        the LSO to answer, and the aborted transactions of the range answered (Kafka's
        upper bound: the offset after the last entry answered)."""
        lso = self.last_stable_offset(high_watermark)
        keep = 0
        while keep < len(spans) and spans[keep][0] < lso:
            keep += 1
        upper = spans[keep - 1][1] + 1 if keep else fetch_offset
        return keep, lso, self.aborted_in_range(fetch_offset, upper) if keep else []

    def open_transactions(self) -> list[ProducerTxn]:
        """Producers with a transaction open here, oldest first (DescribeProducers,
        kafka-transactions find-hanging)."""
        open_ = [p for p in self.producers.values() if p.txn_first_offset is not None]
        return sorted(open_, key=lambda p: p.txn_first_offset or 0)

    # -- KIP-890 part 1 ---------------------------------------------------------------------

    def needs_verification(self, producer_id: int, epoch: int, transactional: bool) -> bool:
        """A transactional batch of a producer with no transaction open here at its epoch
        is taken only once the coordinator says the partition is in its transaction.
        A newer epoch counts as no transaction open (Kafka 4's hasOngoingTransaction):
        under TV2 the producer's next transaction starts at the epoch its EndTxn
        answered, possibly before that transaction's marker reached this partition, and
        its first batch must wait for the coordinator (CONCURRENT_TRANSACTIONS until
        the markers are all written), never join the transaction still open here."""
        if not transactional:
            return False
        p = self.producers.get(producer_id)
        return p is None or p.txn_first_offset is None or p.epoch != epoch

    def begin_verification(self, producer_id: int, epoch: int, first_seq: int, now_ms: int) -> int:
        """Start (or join) a verification and return the guard the batch carries into its
        cycle. A newer epoch starts over; the lowest sequence is kept so a later batch
        cannot overtake the first one while the coordinator answers."""
        v = self.verifications.get(producer_id)
        if v is None or epoch > v.epoch:
            v = Verification(next(_guards), first_seq, epoch, now_ms)
        elif epoch == v.epoch and first_seq < v.lowest_seq:
            v = replace(v, lowest_seq=first_seq)
        self.verifications[producer_id] = v
        return v.guard

    def expire(self, now_ms: int, producer_expiration_ms: int) -> None:
        """Forget producers idle past producer.id.expiration.ms with no open transaction,
        and verifications never finished (Kafka's removeExpiredProducers). A producer
        whose last time is unknown (-1: loaded by a new leader, which keeps no times) is
        counted from this sweep on, never expired at once."""
        self.producers = {
            pid: p if p.last_ms >= 0 else replace(p, last_ms=now_ms)
            for pid, p in self.producers.items()
            if p.txn_first_offset is not None
            or p.last_ms < 0
            or now_ms - p.last_ms < producer_expiration_ms
        }
        self.verifications = {
            pid: v
            for pid, v in self.verifications.items()
            if now_ms - v.started_ms < producer_expiration_ms
        }

    def drop_aborted_below(self, log_start_offset: int) -> None:
        """Retention moved the log start: entries wholly below it are never asked for."""
        self.aborted = [a for a in self.aborted if a.last_offset >= log_start_offset]

    def drop_aborted(self, marker_offsets: Iterable[int]) -> None:
        """Cleaning removed these aborted transactions' records (storage/txn_cleaning.py):
        their entries, by marker offset, would only make a read_committed client skip
        the producer's later batches."""
        gone = set(marker_offsets)
        if gone:
            self.aborted = [a for a in self.aborted if a.last_offset not in gone]

    # -- a cycle ------------------------------------------------------------------------------

    def cycle(self) -> TxnCycle:
        return TxnCycle(self)

    def apply(self, c: TxnCycle) -> None:
        """The cycle's index entries are committed: its changes become the partition's."""
        self.producers.update(c.producers)
        for pid, guard in c.guards_done.items():
            v = self.verifications.get(pid)
            # A marker drops any verification of its producer, even one begun while
            # the cycle committed: it may have been answered for the ended transaction.
            # A batch uses up only its own guard.
            if v is not None and (guard is None or v.guard == guard):
                del self.verifications[pid]
        for a in c.aborted:
            bisect.insort(self.aborted, a, key=_by_last)


def _by_last(a: AbortedTxn) -> int:
    return a.last_offset


class TxnCycle:
    """The partition as the cycle being sequenced would leave it."""

    def __init__(self, base: PartitionTxns) -> None:
        self._base = base
        self.producers: dict[int, ProducerTxn] = {}
        self.aborted: list[AbortedTxn] = []
        self.guards_done: dict[int, int | None] = {}  # producer -> guard used (None: all)

    def _producer(self, producer_id: int) -> ProducerTxn | None:
        return self.producers.get(producer_id) or self._base.producers.get(producer_id)

    def _guard(self, producer_id: int) -> Verification | None:
        if producer_id in self.guards_done:
            return None
        return self._base.verifications.get(producer_id)

    def data_batch(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        transactional: bool,
        base_offset: int,
        now_ms: int,
        guard: int | None = None,
    ) -> ErrorCode:
        """Check one data batch of an idempotent or transactional producer (its sequence
        is the sequencer's to check) and, if it is taken, record it at `base_offset`."""
        p = self._producer(producer_id)
        if p is not None and epoch < p.epoch:
            return E.invalid_producer_epoch
        open_first = None if p is None else p.txn_first_offset
        if open_first is not None and not transactional:
            return E.invalid_txn_state  # a plain write in the middle of its transaction
        if open_first is not None and p is not None and epoch > p.epoch:
            # The transaction open here ended under the older epoch but its marker has not
            # landed: the coordinator answers no verification before it does, so a batch
            # of the next transaction here is a bug upstream; never merge the two.
            return E.invalid_txn_state
        if transactional and open_first is None:
            if guard != UNVERIFIED:
                v = self._guard(producer_id)
                if v is None or guard != v.guard:
                    return E.invalid_txn_state  # not verified, or a marker came meanwhile
                if first_seq > v.lowest_seq:
                    return E.out_of_order_sequence_number
                self.guards_done[producer_id] = v.guard
            open_first = base_offset
        coordinator_epoch = -1 if p is None else p.coordinator_epoch
        self.producers[producer_id] = ProducerTxn(
            producer_id, epoch, coordinator_epoch, open_first, now_ms
        )
        return E.none

    def marker(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        commit: bool,
        offset: int,
        now_ms: int,
    ) -> MarkerWritten:
        """Check and record a commit or abort marker written at `offset`. An older producer
        epoch or coordinator epoch is refused (a zombie's, or a deposed coordinator's);
        under TV2 the marker carries the bumped epoch, which fences every later write of
        the transaction's producer at its old epoch."""
        p = self._producer(producer_id)
        current_epoch = NO_PRODUCER_EPOCH if p is None else p.epoch
        if epoch < current_epoch:
            return MarkerWritten(E.invalid_producer_epoch)
        if p is not None and p.coordinator_epoch > coordinator_epoch:
            return MarkerWritten(E.transaction_coordinator_fenced)
        first = None if p is None else p.txn_first_offset
        aborted = None
        if first is not None and not commit:
            aborted = AbortedTxn(producer_id, first, offset, self._lso_after(producer_id, offset))
            self.aborted.append(aborted)
        self.producers[producer_id] = ProducerTxn(
            producer_id, epoch, coordinator_epoch, None, now_ms
        )
        self.guards_done[producer_id] = None  # a verification begun before it is stale
        return MarkerWritten(E.none, aborted)

    def _lso_after(self, producer_id: int, marker_offset: int) -> int:
        """Kafka's lastStableOffset(completedTxn): the first offset of the earliest other
        open transaction, else just past the marker."""
        merged = {**self._base.producers, **self.producers}
        firsts = [
            p.txn_first_offset
            for pid, p in merged.items()
            if pid != producer_id and p.txn_first_offset is not None
        ]
        return min(firsts, default=marker_offset + 1)
