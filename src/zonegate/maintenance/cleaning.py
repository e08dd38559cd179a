"""Key-based cleaning of a compacted partition, run by its leader's compactor: the I/O.

After the compactor has moved a partition's WAL ranges into stream objects, a
partition whose topic's `cleanup.policy` includes `compact` is cleaned when
storage/cleaner.py says it is due (the policy, `plan_cleaning`, and the
rewrite are pure functions there, beside the clean mark they share): the
dirty part is read to map each key's latest offset, then the clean and dirty
parts are read again in groups of about `--stream-object-bytes`, cleaned and
PUT as objects with the clean mark (crash point `cleaning:after-upload`), and
all their entries swapped for the ones cleaned in one transaction fenced by
the leader epoch (`LogChanges.swap`, crash points `compaction:after-swap`
and `cleaning:after-swap`). A refused swap deletes the objects at once; the
ones replaced go by object GC. Reads, builds and PUTs go through the
compaction I/O class, the CPU work to a thread.

Transactional data keeps Kafka's rules (storage/txn_cleaning.py): the round
ends below the last stable offset, the partition's aborted-transaction index
tells which batches are aborted (they go; their markers later, after the
delete horizon), one transaction state is carried across the groups of the
round, and the index entries of aborted transactions left with no record go
out of `aborted_txns` in the swap's own transaction.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from zonegate.leader_forwarder.log_changes import LogChanges
from zonegate.runtime.clock import Clock
from zonegate.runtime.crash import crash_point
from zonegate.storage.cleaner import (
    CleanerConfig,
    CleanerStats,
    build_cleaned_objects,
    build_offset_map,
    clean,
    plan_cleaning,
)
from zonegate.storage.index import IndexEntry
from zonegate.storage.objects import ObjectStore
from zonegate.storage.txn_cleaning import CleanedTransactions

log = logging.getLogger(__name__)


@dataclass
class CleaningTotals:
    cleanings: int = 0
    swaps_refused: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0


async def clean_partition(
    changes: LogChanges,
    store: ObjectStore,
    read: Callable[[Sequence[IndexEntry]], Awaitable[list[bytes]]],
    clock: Clock,
    stream_id: int,
    config: CleanerConfig,
    *,
    object_bytes: int,
    totals: CleaningTotals,
) -> bool:
    """Cleans the partition if it is due; whether it swapped cleaned objects in."""
    view = await changes.cleaning_view(stream_id)
    epoch = view.leader_epoch
    now = clock.wall_ms()
    plan = plan_cleaning(view.entries, config, now, stable_offset=view.stable_offset)
    if plan is None or not plan.due:
        return False
    dirty = list(plan.dirty)
    blobs = await read(dirty)
    offsets = await asyncio.to_thread(
        functools.partial(
            build_offset_map,
            list(zip(dirty, blobs, strict=True)),
            plan,
            config.max_message_bytes,
            aborted=view.aborted,
        )
    )
    del blobs
    old = plan.entries(offsets.end)
    if not old:
        return False
    txns = CleanedTransactions(view.aborted)
    stats = CleanerStats()
    new: list[IndexEntry] = []
    keys: list[str] = []
    try:
        for group in _groups(old, object_bytes):
            parts = list(zip(group, await read(group), strict=True))
            cleaned = await asyncio.to_thread(
                functools.partial(
                    clean,
                    parts,
                    offsets,
                    config,
                    now,
                    active_producers=view.last_data,
                    marker_producers=view.marker_epochs,
                    txns=txns,
                    stats=stats,
                )
            )
            del parts
            objects = await asyncio.to_thread(
                build_cleaned_objects,
                stream_id,
                epoch,
                cleaned,
                segment_ms=config.segment_window_ms,
                object_bytes=object_bytes,
            )
            for obj in objects:
                await store.put(obj.key, obj.data)
                keys.append(obj.key)
                new += obj.entries
                totals.bytes_written += len(obj.data)
    except BaseException:
        # Nothing names them yet: they go at once. (Not after the swap was tried: a swap
        # that raised may have committed, and its objects are then named.)
        if keys:
            await asyncio.shield(store.delete_many(keys))
        raise
    crash_point("cleaning:after-upload")
    dropped = txns.dropped(offsets.end)
    swapped = await changes.swap(stream_id, epoch, old, new, drop_aborted=dropped)
    totals.bytes_read += stats.bytes_read
    totals.records_read += stats.records_read
    totals.records_kept += stats.records_kept
    if not swapped:
        totals.swaps_refused += 1
        log.info("cleaning of stream %d refused (range changed or leader moved)", stream_id)
        await store.delete_many(keys)
        return False
    crash_point("cleaning:after-swap")
    totals.cleanings += 1
    log.info(
        "stream %d cleaned offsets %d-%d: %d of %d records kept, %d entries into %d; "
        "%d aborted records and %d markers dropped, %d aborted transactions unindexed",
        stream_id,
        old[0].base_offset,
        offsets.end - 1,
        stats.records_kept,
        stats.records_read,
        len(old),
        len(new),
        stats.aborted_dropped,
        stats.markers_dropped,
        len(dropped),
    )
    return True


def _groups(entries: list[IndexEntry], size: int) -> list[list[IndexEntry]]:
    """Runs of entries of about `size` bytes: what one step reads and cleans."""
    out: list[list[IndexEntry]] = []
    total = 0
    for e in entries:
        if not out or (total + e.length > size and out[-1]):
            out.append([])
            total = 0
        out[-1].append(e)
        total += e.length
    return out
