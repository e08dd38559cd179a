"""A leader's index reads: entries by offset and by time, offsets, high-watermark watches.

The tail (entries still in WAL objects) is answered from memory; below it the
metadata store is asked, by offset through its primary key, by time within
the one segment the summary names (docs/storage.md, "The bounded index").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode

from zonegate.leader_forwarder.messages import ReadIndexResult
from zonegate.leader_forwarder.partitions import PartitionState, PartitionStates
from zonegate.storage.index import IndexEntry, StreamIndex, StreamStore

# Entries a read below the tail asks the store for at once; the client asks again.
_STORE_READ_LIMIT = 1000
_TIME_LOOKUP_LIMIT = 4


def _up_to(entries: Sequence[IndexEntry], max_bytes: int) -> list[IndexEntry]:
    """The first entries within `max_bytes` (at least one)."""
    out: list[IndexEntry] = []
    total = 0
    for e in entries:
        if out and total + e.length > max_bytes:
            break
        out.append(e)
        total += e.length
    return out


class IndexReads:
    def __init__(self, partitions: PartitionStates, metastore: StreamStore) -> None:
        self._partitions = partitions
        self._meta = metastore

    async def read_index(
        self, stream_id: int, offset: int, max_bytes: int, read_committed: bool = False
    ) -> ReadIndexResult:
        """Index entries from the one holding `offset`, up to `max_bytes` (at least one):
        from the tail in memory, or from the store below it. With `read_committed`, only
        the entries below the last stable offset (a transaction's first batch starts the
        unstable range, so none straddles it) and the aborted transactions of the range
        answered (Kafka's collectAbortedTxns)."""
        p = await self._partitions.led(stream_id)
        hwm, start = p.high_watermark, p.log_start_offset
        lso = p.txns.last_stable_offset(hwm)
        if offset < start or offset > hwm:
            return ReadIndexResult(
                ErrorCode.offset_out_of_range, (), hwm, start, p.leader_epoch, lso
            )
        tail_first = p.tail.first_offset
        if tail_first is not None and offset >= tail_first:
            out = p.tail.from_offset(offset, max_bytes)
        else:
            rows = await self._meta.read_entries(
                stream_id,
                offset,
                to_offset=None if tail_first is None else tail_first - 1,
                limit=_STORE_READ_LIMIT,
            )
            out = _up_to(rows, max_bytes)
            if not out and tail_first is not None:
                out = p.tail.from_offset(offset, max_bytes)
        if not read_committed:
            return ReadIndexResult(ErrorCode.none, tuple(out), hwm, start, p.leader_epoch, lso)
        spans = [(e.base_offset, e.last_offset) for e in out]
        keep, lso, aborted = p.txns.read_committed(spans, offset, hwm)
        return ReadIndexResult(
            ErrorCode.none,
            tuple(out[:keep]),
            hwm,
            start,
            p.leader_epoch,
            lso,
            tuple((a.producer_id, a.first_offset) for a in aborted),
        )

    async def stable_offset(self, stream_id: int) -> int:
        p = await self._partitions.led(stream_id)
        return p.txns.last_stable_offset(p.high_watermark)

    async def offsets(self, stream_id: int) -> tuple[int, int, int]:
        """(log start offset, high watermark, leader epoch)."""
        p = await self._partitions.led(stream_id)
        return p.log_start_offset, p.high_watermark, p.leader_epoch

    async def entries_from_timestamp(self, stream_id: int, timestamp: int) -> list[IndexEntry]:
        """The first entries (offset order) whose max timestamp reaches `timestamp`: the
        summary names the segment, the store or the tail its entries."""
        p = await self._partitions.led(stream_id)
        for seg in p.summary.segments:
            if seg.max_timestamp < timestamp:
                continue
            out = await self._in_range(
                p,
                seg.base_offset,
                seg.last_offset,
                lambda t: t.from_timestamp(timestamp),
                lambda lo, hi: self._meta.entries_at_time(
                    stream_id, timestamp, lo, hi, _TIME_LOOKUP_LIMIT
                ),
            )
            found = [e for e in out if e.max_timestamp >= timestamp][:_TIME_LOOKUP_LIMIT]
            if found:
                return found
        return []

    async def max_timestamp_entry(self, stream_id: int) -> IndexEntry | None:
        p = await self._partitions.led(stream_id)
        seg = p.summary.newest()
        if seg is None:
            return None

        async def newest(lo: int, hi: int) -> list[IndexEntry]:
            e = await self._meta.newest_entry(stream_id, lo, hi)
            return [] if e is None else [e]

        def newest_in_tail(t: StreamIndex) -> list[IndexEntry]:
            e = t.max_timestamp_entry()
            return [] if e is None else [e]

        found = await self._in_range(p, seg.base_offset, seg.last_offset, newest_in_tail, newest)
        best: IndexEntry | None = None
        for e in found:
            if best is None or e.max_timestamp > best.max_timestamp:
                best = e
        return best

    async def _in_range(
        self,
        p: PartitionState,
        lo: int,
        hi: int,
        in_tail: Callable[[StreamIndex], list[IndexEntry]],
        in_store: Callable[[int, int], Awaitable[list[IndexEntry]]],
    ) -> list[IndexEntry]:
        """A lookup over the entries of offsets lo..hi: the store's part below the tail,
        then the tail's part, in offset order."""
        tail_first = p.tail.first_offset
        out: list[IndexEntry] = []
        if tail_first is None or lo < tail_first:
            out += await in_store(lo, hi if tail_first is None else min(hi, tail_first - 1))
        if tail_first is not None and hi >= tail_first:
            part = StreamIndex(
                e for e in p.tail.entries() if e.base_offset <= hi and e.last_offset >= lo
            )
            out += in_tail(part)
        return out

    async def changed(self, stream_id: int) -> asyncio.Future[None]:
        """A future completed at the next high-watermark move (or state drop) of the partition."""
        return (await self._partitions.led(stream_id)).changed()
