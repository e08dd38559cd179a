"""Sequencing and group commit: a leader's appends get offsets, checked for idempotence.

Appends from every proxy queue up; one committer task takes everything queued,
checks each batch against the partition's producer state (the last five
batches per producer, as Kafka keeps), assigns base offsets, and commits the
index entries of all partitions of the cycle in one metadata-store transaction
fenced by leader epoch. Only then does the high watermark move and do the
callers get their offsets. While one cycle commits, the next fills: the group
commit is the natural batching, with no timer.

Transaction markers (control batches the transaction coordinator writes through the
write path, docs/transactions.md) are checked in the same cycle against the partition's
transaction rules (`TxnCycle`): an older producer epoch or coordinator epoch is refused,
an abort of a transaction open here adds an aborted-index entry, and the producer's
coordinator epoch and open transaction ride in its producer row, written whole.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from zonegate.kafka_errors import OUTCOME_UNKNOWN
from zonegate.leader_forwarder.messages import (
    ANY_EPOCH,
    CONTROL_COMMIT,
    CONTROL_NONE,
    AppendBatch,
    AppendResult,
)
from zonegate.leader_forwarder.partitions import PartitionState, PartitionStates
from zonegate.leader_forwarder.txn_verify import TxnVerifier
from zonegate.metastore.models import MetaStoreUnavailable
from zonegate.runtime.clock import Clock
from zonegate.storage.index import (
    IndexEntry,
    PartitionCommit,
    ProducerBatch,
    ProducerEntry,
    StreamStore,
    UnknownStream,
)
from zonegate.transactions.partition_txns import TxnCycle

log = logging.getLogger(__name__)
_SEQ_MOD = 1 << 31
_PRODUCER_BATCHES_KEPT = 5

# Per append: its batches; the guards of their verifications and the errors of those the
# transaction coordinator refused, by the batch's index (txn_verify.py); its answer.
_Checked = tuple[dict[int, tuple[int, PartitionState]], dict[int, ErrorCode]]
_Cycle = list[tuple[Sequence[AppendBatch], _Checked, asyncio.Future[list[AppendResult]]]]


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _SEQ_MOD - 1)


@dataclass
class _Tentative:
    """A partition's state as the current cycle would leave it, applied only after commit."""

    next_offset: int
    txns: TxnCycle
    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    entries: list[IndexEntry] = field(default_factory=list)

    def producer_rows(self, p: PartitionState) -> tuple[ProducerEntry, ...]:
        """The producers' rows as the cycle leaves them, written whole: each carries its
        coordinator epoch and open transaction forward (a row without them would reset
        them at the next commit)."""
        rows = []
        for e in self.producers.values():
            txn = self.txns.producers.get(e.producer_id) or p.txns.producers.get(e.producer_id)
            if txn is not None:
                e = replace(
                    e,
                    coordinator_epoch=txn.coordinator_epoch,
                    txn_first_offset=txn.txn_first_offset,
                )
            rows.append(e)
        return tuple(rows)


class Sequencer:
    def __init__(self, partitions: PartitionStates, metastore: StreamStore, clock: Clock) -> None:
        self._partitions = partitions
        self._meta = metastore
        self._clock = clock
        self._queue: _Cycle = []
        self._committer: asyncio.Task[None] | None = None
        self._store_down = False  # said in the log once, until a commit succeeds again
        self.commit_cycles = 0
        # Partitions' commits refused by the store because their leader epoch moved (a
        # move, a cut-off zone's leader deposed: docs/leader-protocol.md).
        self.fenced_commits = 0
        # KIP-890's verification of transactions' first batches; with no coordinators
        # (until the node wires them) such a batch is refused.
        self.verifier = TxnVerifier(partitions, None, lambda stream_id: None)

    async def append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        """Each batch's offset or error. With the metadata store out of reach, batches
        not yet sent to it get KAFKA_STORAGE_ERROR (nothing written; Kafka's answer
        when a log cannot be written) and those of a commit that failed get
        REQUEST_TIMED_OUT (the outcome unknown); clients retry both, and the log says
        so once, not once per request."""
        try:
            results = await self._append(batches)
        except MetaStoreUnavailable as exc:
            self._store_lost(exc)
            return [AppendResult(ErrorCode.kafka_storage_error)] * len(batches)
        if self._store_down and any(r.error == ErrorCode.none for r in results):
            self._store_down = False
            log.warning("appends are committed again")
        return results

    def _store_lost(self, exc: MetaStoreUnavailable) -> None:
        if not self._store_down:
            self._store_down = True
            log.warning("appends fail until the metadata store is back: %s", exc)

    async def _append(self, batches: Sequence[AppendBatch]) -> list[AppendResult]:
        newest: dict[int, int] = {}
        for b in batches:
            newest[b.stream_id] = max(newest.get(b.stream_id, ANY_EPOCH), b.leader_epoch)
        unknown: set[int] = set()
        for sid, epoch in newest.items():
            try:
                p = await self._partitions.get(sid)
                if epoch > p.leader_epoch:
                    # The partition moved here (again) since we cached it: reload its state.
                    self._partitions.forget([sid])
                    await self._partitions.get(sid)
            except UnknownStream:
                unknown.add(sid)  # its topic was deleted meanwhile, or the caller is wrong
        if unknown:
            known = [b for b in batches if b.stream_id not in unknown]
            answers = iter(await self._append(known) if known else [])
            return [
                AppendResult(ErrorCode.unknown_topic_or_partition)
                if b.stream_id in unknown
                else next(answers)
                for b in batches
            ]
        checked = await self.verifier.verify(batches, self._clock.wall_ms())
        fut: asyncio.Future[list[AppendResult]] = asyncio.get_running_loop().create_future()
        self._queue.append((batches, checked, fut))
        if self._committer is None or self._committer.done():
            self._committer = asyncio.get_running_loop().create_task(self._commit_loop())
        return await fut

    async def _commit_loop(self) -> None:
        while self._queue:
            cycle, self._queue = self._queue, []
            self._partitions.commit_started(
                {b.stream_id for batches, _, _ in cycle for b in batches}
            )
            try:
                await self._commit_cycle(cycle)
            except Exception as exc:
                if isinstance(exc, MetaStoreUnavailable):
                    self._store_lost(exc)
                else:
                    log.exception("group commit of %d appends failed", len(cycle))
                # The commit may have landed before the error (a connection lost after
                # COMMIT was sent): reload these partitions from the store before their
                # next append, or the next commit would reuse offsets already indexed;
                # and answer REQUEST_TIMED_OUT, the outcome unknown, not an error that
                # says nothing was written (directory.py).
                self._partitions.forget(self._partitions.committing)
                for batches, _, fut in cycle:
                    if not fut.done():
                        fut.set_result([AppendResult(OUTCOME_UNKNOWN)] * len(batches))
            finally:
                self._partitions.commit_ended()

    async def _commit_cycle(self, cycle: _Cycle) -> None:
        tentative: dict[int, _Tentative] = {}
        results: list[list[AppendResult]] = []
        now = self._clock.wall_ms()  # every entry of the cycle is appended at once
        for batches, (guards, refused), _ in cycle:
            results.append(
                [
                    AppendResult(refused[i])
                    if i in refused
                    else self._sequence(b, tentative, now, guards.get(i))
                    for i, b in enumerate(batches)
                ]
            )
        commits = []
        for sid, t in tentative.items():
            if not t.entries:
                continue
            p = self._partitions.cached(sid)
            assert p is not None  # sequenced against it just now, with no await since
            commits.append(
                PartitionCommit(
                    stream_id=sid,
                    leader_epoch=p.leader_epoch,
                    next_offset=t.next_offset,
                    entries=tuple(t.entries),
                    producers=t.producer_rows(p),
                    aborted=tuple(t.txns.aborted),
                )
            )
        fenced = await self._meta.commit_appends(commits) if commits else set()
        self.commit_cycles += 1
        for c in commits:
            if c.stream_id in fenced:
                continue
            q = self._partitions.cached(c.stream_id)
            if q is None or q.leader_epoch != c.leader_epoch:
                # Dropped (moved, or reloaded) while this commit was in flight: it is in
                # the store all the same, and whoever loads the partition next sees it.
                # Its callers must hear that it was written, not an error they would
                # answer with a retry.
                continue
            t = tentative[c.stream_id]
            q.producers.update(t.producers)
            q.txns.apply(t.txns)
            q.summary.configure(*self._partitions.segmenting(c.stream_id))
            q.summary.extend(t.entries)
            q.tail.extend(t.entries)
            q.high_watermark = t.next_offset
            q.notify()
        if fenced:
            self.fenced_commits += len(fenced)
            log.warning("appends to streams %s fenced: leader epoch moved", sorted(fenced))
            self._partitions.forget(fenced)
        for (batches, _, fut), res in zip(cycle, results, strict=True):
            if fut.done():
                continue
            fut.set_result(
                [
                    AppendResult(ErrorCode.not_leader_or_follower) if b.stream_id in fenced else r
                    for b, r in zip(batches, res, strict=True)
                ]
            )

    def _sequence(
        self,
        b: AppendBatch,
        tentative: dict[int, _Tentative],
        now: int,
        verified: tuple[int, PartitionState] | None,
    ) -> AppendResult:
        p = self._partitions.cached(b.stream_id)
        if p is None or (verified is not None and verified[1] is not p):
            # Dropped, or reloaded since its verification began (the guard went with the
            # old state): retriable, the producer sends it again and it is asked again.
            return AppendResult(ErrorCode.not_leader_or_follower)
        guard = None if verified is None else verified[0]
        if b.leader_epoch != ANY_EPOCH and b.leader_epoch != p.leader_epoch:
            code = (
                ErrorCode.fenced_leader_epoch
                if b.leader_epoch < p.leader_epoch
                else ErrorCode.unknown_leader_epoch
            )
            return AppendResult(code)
        t = tentative.get(b.stream_id)
        if t is None:
            t = tentative[b.stream_id] = _Tentative(p.high_watermark, p.txns.cycle())
        if b.control != CONTROL_NONE:
            return self._marker(b, p, t, now)
        last_seq = -1
        prior: tuple[ProducerBatch, ...] = ()
        batch_last = (b.base_sequence + b.record_count - 1) % _SEQ_MOD
        if b.producer_id >= 0:
            entry = t.producers.get(b.producer_id) or p.producers.get(b.producer_id)
            if entry is not None:
                if b.producer_epoch < entry.epoch:
                    return AppendResult(ErrorCode.invalid_producer_epoch)
                if b.producer_epoch == entry.epoch:
                    for old in entry.batches:
                        if old.first_seq == b.base_sequence and old.last_seq == batch_last:
                            # A retry of a batch already appended: answer with its offset.
                            return AppendResult(ErrorCode.none, old.base_offset, p.log_start_offset)
                    last_seq = entry.last_seq
                    if entry.batches and not _in_sequence(last_seq, b.base_sequence):
                        return AppendResult(ErrorCode.out_of_order_sequence_number)
                    prior = entry.batches
                elif b.base_sequence != 0:
                    return AppendResult(ErrorCode.out_of_order_sequence_number)
        base = t.next_offset
        if b.producer_id >= 0 and (
            b.transactional
            or b.producer_id in t.txns.producers
            or b.producer_id in p.txns.producers
        ):
            # The transaction rules: a plain batch in the middle of its producer's open
            # transaction is refused, and a transactional one that would open a
            # transaction here is taken only with its verification's guard (KIP-890).
            error = t.txns.data_batch(
                b.producer_id, b.producer_epoch, b.base_sequence, b.transactional, base, now, guard
            )
            if error != ErrorCode.none:
                return AppendResult(error)
        last = base + b.record_count - 1
        t.next_offset = last + 1
        t.entries.append(
            IndexEntry(base, last, b.object_key, b.position, b.length, b.max_timestamp, now)
        )
        if b.producer_id >= 0:
            kept = prior[-(_PRODUCER_BATCHES_KEPT - 1) :] + (
                ProducerBatch(b.base_sequence, batch_last, base, last),
            )
            t.producers[b.producer_id] = ProducerEntry(
                b.producer_id, b.producer_epoch, kept, last_timestamp=b.max_timestamp, last_ms=now
            )
        return AppendResult(ErrorCode.none, base, p.log_start_offset)

    def _marker(self, b: AppendBatch, p: PartitionState, t: _Tentative, now: int) -> AppendResult:
        """A commit or abort marker: checked against the producer's epoch (its idempotent
        state's and its transaction state's) and the coordinator epoch, then indexed as a
        one-record batch. A marker of a newer producer epoch (TV2's bump at EndTxn)
        starts the producer's sequences over, as Kafka's producer state does."""
        entry = t.producers.get(b.producer_id) or p.producers.get(b.producer_id)
        if entry is not None and b.producer_epoch < entry.epoch:
            return AppendResult(ErrorCode.invalid_producer_epoch)
        base = t.next_offset
        done = t.txns.marker(
            b.producer_id,
            b.producer_epoch,
            b.coordinator_epoch,
            b.control == CONTROL_COMMIT,
            base,
            now,
        )
        if done.error != ErrorCode.none:
            return AppendResult(done.error)
        t.next_offset = base + 1
        t.entries.append(
            IndexEntry(base, base, b.object_key, b.position, b.length, b.max_timestamp, now)
        )
        kept = entry.batches if entry is not None and entry.epoch == b.producer_epoch else ()
        t.producers[b.producer_id] = ProducerEntry(
            b.producer_id, b.producer_epoch, kept, last_timestamp=b.max_timestamp, last_ms=now
        )
        return AppendResult(ErrorCode.none, base, p.log_start_offset)
