"""A day of slow writes on an injected clock: stream objects and index rows per partition.

A few partitions each take a little data every few seconds for a whole day, the
way a low-rate topic with long retention lives; the node's own leader and
compactor (a real SQLite metadata store and a real local object store) run on a
`ManualClock`, one compaction pass a minute, with the node's default settings
(16 MiB stream objects, 9-minute compaction delay, 10-minute orphan grace). The
day runs twice: with small stream objects merged into the next compaction's
object (maintenance/compaction.py, `merge_previous`) and without. Printed per
run: the stream objects and index rows each partition keeps at the end of the
day, and the bytes merges wrote again. `benchmarks/storage.py` prints its line;
alone:

    python benchmarks/slow_writes.py [--bytes-per-s 100] [--partitions 4] [--hours 24]

Its last line is exactly `slow writes, a day: objects per partition X merged, Y
not; index rows per partition Z merged, W not`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zonegate.leader_forwarder.leader import LeaderService  # noqa: E402
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch  # noqa: E402
from zonegate.maintenance.compaction import CompactionSettings, Compactor  # noqa: E402
from zonegate.maintenance.targets import Target  # noqa: E402
from zonegate.metastore.sqlite import SqliteMetaStore  # noqa: E402
from zonegate.records.build import build_batch  # noqa: E402
from zonegate.runtime.clock import ManualClock  # noqa: E402
from zonegate.storage.log_cache import LogCache  # noqa: E402
from zonegate.storage.reader import StreamReader  # noqa: E402
from zonegate.storage.store_url import open_object_store  # noqa: E402
from zonegate.storage.stream_objects import is_stream_key  # noqa: E402

WEEK_MS = 7 * 86_400_000  # Kafka's default segment.ms (log.roll.hours 168)
DEFAULT_OBJECT_BYTES = 1 << 30  # segment.bytes


class DayResult(NamedTuple):
    objects_per_partition: float
    rows_per_partition: float
    bytes_merged: int
    bytes_compacted: int


async def _day(
    root: Path, merge: bool, bytes_per_s: int, partitions: int, hours: float
) -> DayResult:
    clock = ManualClock()
    meta = SqliteMetaStore(str(root / "meta.db"))
    store = open_object_store((root / "objects").as_uri())
    leader = LeaderService(meta, clock, lambda _sid: (WEEK_MS, DEFAULT_OBJECT_BYTES))
    topic = await meta.create_topic("slow", {}, [1] * partitions)
    sids = [p.stream_id for p in topic.partitions]
    settings = CompactionSettings(wal_hold_ms=600_000, merge=merge)
    compactor = Compactor(
        leader.changes,
        store,
        StreamReader(store, LogCache(0)).read,
        lambda: [Target(s, WEEK_MS, DEFAULT_OBJECT_BYTES, retention_ms=WEEK_MS) for s in sids],
        clock,
        settings,
    )
    # One WAL object every 10 s (a producer's batch per partition in it), then a pass (the
    # node passes every 5 s by default).
    step_s, pass_every = 10, 1
    value = b"x" * max(1, bytes_per_s * step_s - 70)  # one record, about the rate's bytes
    for n in range(int(hours * 3600 / step_s)):
        now = clock.wall_ms()
        blobs = [build_batch([(b"k", value, (), now)]) for _ in sids]
        key = f"wal/{n:08d}"
        await store.put(key, b"".join(blobs))
        pos, batches = 0, []
        for sid, blob in zip(sids, blobs, strict=True):
            batches.append(AppendBatch(sid, ANY_EPOCH, key, pos, len(blob), 1, now, -1, -1, -1))
            pos += len(blob)
        assert all(r.error == 0 for r in await leader.append(batches))
        await clock.advance(step_s)
        if n % pass_every == pass_every - 1:
            await compactor.run_once()
    objects = rows = 0
    for sid in sids:
        index = [e for e in await meta.read_index(sid) if is_stream_key(e.object_key)]
        objects += len({e.object_key for e in index})
        rows += len(index)
    await meta.close()
    stats = compactor.stats
    return DayResult(
        objects / partitions, rows / partitions, stats.bytes_merged, stats.bytes_compacted
    )


def run_day(
    merge: bool, bytes_per_s: int = 100, partitions: int = 4, hours: float = 24
) -> DayResult:
    with tempfile.TemporaryDirectory(prefix="zonegate-slow-") as tmp:
        return asyncio.run(_day(Path(tmp), merge, bytes_per_s, partitions, hours))


def summary(bytes_per_s: int = 100, partitions: int = 4, hours: float = 24) -> str:
    merged = run_day(True, bytes_per_s, partitions, hours)
    plain = run_day(False, bytes_per_s, partitions, hours)
    rewrite = merged.bytes_merged / max(1, merged.bytes_compacted)
    print(
        f"slow writes ({bytes_per_s} B/s per partition, {partitions} partitions, {hours:g} h): "
        f"merges wrote {merged.bytes_merged / 2**20:.1f} MiB again for "
        f"{merged.bytes_compacted / 2**20:.1f} MiB compacted ({rewrite:.2f} times)"
    )
    return (
        f"slow writes, a day: objects per partition {merged.objects_per_partition:.0f} merged, "
        f"{plain.objects_per_partition:.0f} not; index rows per partition "
        f"{merged.rows_per_partition:.0f} merged, {plain.rows_per_partition:.0f} not"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bytes-per-s", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--hours", type=float, default=24)
    args = parser.parse_args()
    print(summary(args.bytes_per_s, args.partitions, args.hours))


if __name__ == "__main__":
    main()
