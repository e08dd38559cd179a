"""What a leader keeps of each partition it leads, loaded once from the store and dropped
when the partition moves.

A led partition's state is its offsets and producers, a summary of its segments,
and its tail (the entries still in WAL objects); the rest of its index is read
from the store when asked for (docs/storage.md, "The bounded index"). The
sequencer, the index reads and the head-of-log hooks all work on this state;
this module loads it (at most once at a time per partition, after any commit
of it in flight) and forgets it.

Reads are served only from a state loaded at the epoch at which the node's catalog
says this node leads the partition (`led`). Anything else is another leader's log
seen once: a read that loads it (a caller with an older catalog, a Watch woken by
the drop of a partition that moved away) gets a copy no append updates, and once
the partition moves back here, its frozen high watermark would be served as the
leader's until the catalog caught up: offsets that exist answered
OFFSET_OUT_OF_RANGE, which a consumer resetting to the latest offset takes as
license to skip them. Appends need no such check: they carry the epoch they were
sent at, and the store fences commits by it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from zonegate.leader_forwarder.api import LeaderUnavailable
from zonegate.storage.index import ProducerEntry, StreamIndex, StreamStore
from zonegate.storage.segments import SegmentSummary
from zonegate.storage.stream_objects import is_stream_key
from zonegate.transactions.partition_txns import AbortedTxn, PartitionTxns, ProducerTxn

# Kafka's defaults of segment.ms and segment.bytes, for a leader told no topic's.
KAFKA_SEGMENTING = (604_800_000, 1_073_741_824)


class NotLeading(LeaderUnavailable):
    """This node does not lead the partition at the epoch its state is held at, as far
    as its catalog knows: the caller refreshes its own view and asks again."""

    def __init__(self, stream_id: int) -> None:
        super().__init__(f"stream {stream_id} is not led here at the epoch held")


@dataclass(slots=True)
class PartitionState:
    """A partition's state as its leader holds it."""

    stream_id: int
    leader_epoch: int
    log_start_offset: int
    high_watermark: int
    producers: dict[int, ProducerEntry]
    summary: SegmentSummary
    tail: StreamIndex
    # Transactions (transactions/partition_txns.py): producers' open transactions and
    # markers' coordinator epochs, and the aborted-transaction index.
    txns: PartitionTxns = field(default_factory=PartitionTxns)
    # Made when someone waits (a long-polling fetch, a Watch), not per partition held
    # nor per move of its high watermark: a node leading 100,000 partitions, few of
    # them read at the tail, keeps few.
    _changed: asyncio.Future[None] | None = field(default=None, repr=False)

    def changed(self) -> asyncio.Future[None]:
        """A future completed at the next high-watermark move (or drop) of the state."""
        if self._changed is None:
            self._changed = asyncio.get_running_loop().create_future()
        return self._changed

    def notify(self) -> None:
        if self._changed is not None:
            if not self._changed.done():
                self._changed.set_result(None)
            self._changed = None


class PartitionStates:
    """The led partitions' states by stream id, and the commit in flight they wait for."""

    def __init__(
        self,
        metastore: StreamStore,
        segmenting: Callable[[int], tuple[int, int]] | None = None,
        leads: Callable[[int], int | None] | None = None,
    ) -> None:
        self._meta = metastore
        # stream id -> (segment.ms, segment.bytes) of its topic, as in force now.
        self.segmenting = segmenting or (lambda _sid: KAFKA_SEGMENTING)
        # stream id -> the leader epoch at which the catalog says this node leads it,
        # None when another node does (or no catalog knows it); None itself: no
        # catalog (a single leader over its store, in tests), reads are not checked.
        self._leads = leads
        self._states: dict[int, PartitionState] = {}
        self._loading: dict[int, asyncio.Future[PartitionState]] = {}
        # The streams of the cycle being committed, and a future completed when it is.
        self._committing: set[int] = set()
        self._committed: asyncio.Future[None] | None = None

    def cached(self, stream_id: int) -> PartitionState | None:
        """The partition's state if loaded (a commit's outcome applies only to it)."""
        return self._states.get(stream_id)

    def lso_lags(self) -> dict[int, int]:
        """Per partition held with a transaction open: high watermark - last stable offset
        (how far read_committed consumers are held back)."""
        return {
            sid: p.high_watermark - p.txns.last_stable_offset(p.high_watermark)
            for sid, p in list(self._states.items())
            if p.txns.first_unstable_offset() is not None
        }

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forgets the producers idle `expiration_ms` (the leader's clock at their last
        append) with no transaction open, in every partition held but those being
        committed (Kafka's removeExpiredProducers); how many were forgotten. Their rows
        stay in the store, so a new leader loads them again and counts them from then."""
        dropped = 0
        for sid, p in list(self._states.items()):
            if sid in self._committing:
                continue
            p.txns.expire(now_ms, expiration_ms)
            kept: dict[int, ProducerEntry] = {}
            for pid, e in p.producers.items():
                if e.last_ms < 0:  # loaded: unknown, counted from now
                    kept[pid] = replace(e, last_ms=now_ms)
                elif now_ms - e.last_ms < expiration_ms or pid in p.txns.producers:
                    kept[pid] = e
            dropped += len(p.producers) - len(kept)
            p.producers = kept
        return dropped

    def stored_bytes(self) -> int:
        """Bytes of stored batches of the partitions held."""
        return sum(p.summary.total_bytes for p in self._states.values())

    async def get(self, stream_id: int) -> PartitionState:
        """The partition's state, loaded from the store if not held (UnknownStream when
        the store has no such partition)."""
        p = self._states.get(stream_id)
        if p is not None:
            return p
        pending = self._loading.get(stream_id)
        if pending is not None:
            return await pending
        fut: asyncio.Future[PartitionState] = asyncio.get_running_loop().create_future()
        self._loading[stream_id] = fut
        try:
            # A commit of this partition in flight (its state was dropped meanwhile: a
            # catalog change, a failed cycle) lands first: a load that read the store
            # before it would hand the next cycle offsets that commit took.
            while stream_id in self._committing and self._committed is not None:
                await asyncio.shield(self._committed)
            state = await self._meta.load_partition(stream_id)
            # Read once, to draw the segments and keep the tail; not kept whole.
            entries = await self._meta.read_index(stream_id)
            # The store's log start, not the first entry's offset: cleaning a compacted
            # topic removes records from the head without moving it (as Kafka's segments
            # keep their base offsets).
            log_start = state.log_start_offset
            in_streams = max(
                (i + 1 for i, e in enumerate(entries) if is_stream_key(e.object_key)), default=0
            )
            p = PartitionState(
                stream_id=stream_id,
                leader_epoch=state.leader_epoch,
                log_start_offset=log_start,
                high_watermark=state.next_offset,
                producers=dict(state.producers),
                summary=SegmentSummary.of(entries, *self.segmenting(stream_id)),
                tail=StreamIndex(entries[in_streams:]),
                txns=_txns(state.producers.values(), state.aborted),
            )
            self._states[stream_id] = p
            fut.set_result(p)
            return p
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: the awaiting callers see it too
            raise
        finally:
            del self._loading[stream_id]

    async def led(self, stream_id: int) -> PartitionState:
        """The partition's state for a read: only at the epoch at which this node leads
        it by its catalog (module doc); NotLeading otherwise. A copy held at an older
        epoch is dropped and the partition reloaded."""
        if self._leads is None:
            return await self.get(stream_id)
        epoch = self._leads(stream_id)
        if epoch is None:
            raise NotLeading(stream_id)
        held = self._states.get(stream_id)
        if held is not None and held.leader_epoch < epoch:
            # Loaded before the partition came (back) here: the catalog listener drops
            # it too (moves.py), but a read may come first.
            self.forget([stream_id])
        p = await self.get(stream_id)
        if p.leader_epoch != epoch:
            # The store is ahead of the catalog (moved again since). Kept, as appends
            # at its epoch may have loaded it here; served once the catalog agrees,
            # and dropped by the catalog listener if another node leads it.
            raise NotLeading(stream_id)
        return p

    def forget(self, stream_ids: Iterable[int]) -> None:
        """Drops cached state (partition deleted or moved); the next use reloads it."""
        for sid in stream_ids:
            p = self._states.pop(sid, None)
            if p is not None:
                p.notify()

    def forget_unless_at(self, epochs: Mapping[int, int]) -> None:
        """Drops the cached state of each partition not held at the given leader epoch
        (this node leads it at that epoch now): state loaded at the new epoch already,
        when its first append came before the catalog said so, is kept."""
        self.forget(
            sid
            for sid, epoch in epochs.items()
            if (p := self._states.get(sid)) is not None and p.leader_epoch != epoch
        )

    # -- the commit in flight (the sequencer's) --------------------------------
    def commit_started(self, stream_ids: set[int]) -> None:
        self._committing = stream_ids
        self._committed = asyncio.get_running_loop().create_future()

    @property
    def committing(self) -> set[int]:
        return self._committing

    def commit_ended(self) -> None:
        self._committing = set()
        if self._committed is not None and not self._committed.done():
            self._committed.set_result(None)


def _txns(producers: Iterable[ProducerEntry], aborted: Iterable[AbortedTxn]) -> PartitionTxns:
    """The transaction state a commit left: producers that ever saw a marker here or
    have a transaction open here (the others are idempotent producers only), and the
    aborted index from the log start on."""
    return PartitionTxns.load(
        (
            ProducerTxn(e.producer_id, e.epoch, e.coordinator_epoch, e.txn_first_offset)
            for e in producers
            if e.coordinator_epoch != -1 or e.txn_first_offset is not None
        ),
        aborted,
    )
