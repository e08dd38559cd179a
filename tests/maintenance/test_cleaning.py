"""Key-based cleaning run by the compactor's pass (maintenance/cleaning.py), over a real
SQLite metadata store and a real local object store, on a manual clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.maintenance.test_compaction import _SEG, _Rig
from zonegate.leader_forwarder.leader import LeaderService
from zonegate.leader_forwarder.messages import ANY_EPOCH, AppendBatch
from zonegate.maintenance.compaction import CompactionSettings, Compactor
from zonegate.maintenance.targets import Target
from zonegate.records.build import build_batch
from zonegate.records.decode import decode_records
from zonegate.runtime.clock import ManualClock
from zonegate.storage.cleaner import CleanerConfig, clean_mark

pytestmark = pytest.mark.unit

HOUR = 3_600_000


class _CleaningRig(_Rig):
    def __init__(self, tmp: Path, clock: ManualClock) -> None:
        super().__init__(tmp, clock)
        config = CleanerConfig(delete_retention_ms=HOUR, segment_ms=_SEG)
        self.compactor = Compactor(
            self.leader.changes,
            self.store,
            self.reader.read,
            lambda: [Target(self.sid, _SEG, 1 << 30, config)],
            clock,
            CompactionSettings(stream_object_bytes=64 * 1024, max_delay_ms=60_000),
        )

    async def produce_keyed(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """One batch, in a WAL object of its own."""
        now = self.clock.wall_ms()
        blob = build_batch([(k, v, (), now) for k, v in records])
        key = f"wal/t/{self.n:08d}"
        await self.store.put(key, blob)
        batch = AppendBatch(self.sid, ANY_EPOCH, key, 0, len(blob), len(records), now, -1, -1, -1)
        assert (await self.leader.append([batch]))[0].error == 0
        self.n += len(records)

    async def latest(self) -> list[tuple[int, bytes | None, bytes | None]]:
        rows = await self.meta.read_index(self.sid)
        blobs = await self.reader.read(rows)
        return [(r.offset, r.key, r.value) for b in blobs for r in decode_records(b)]


def test_the_compactors_pass_cleans_a_compacted_partition(tmp_path: Path) -> None:
    async def run() -> None:
        rig = _CleaningRig(tmp_path, ManualClock())
        await rig.setup()
        for u in range(50):
            await rig.produce_keyed([(b"k%d" % k, b"%d-%d" % (k, u)) for k in range(10)])
        await rig.produce_keyed([(b"k0", None)])
        before = rig.leader.stored_bytes()
        await rig.clock.advance(2 * HOUR / 1000)  # the segment closed, the tail old
        await rig.compactor.run_once()
        assert rig.compactor.cleaning.cleanings == 1
        got = await rig.latest()
        assert got == [(490 + k, b"k%d" % k, b"%d-49" % k) for k in range(1, 10)] + [
            (500, b"k0", None)
        ]
        rows = await rig.meta.read_index(rig.sid)
        assert all(clean_mark(e.object_key)[0] for e in rows)
        assert rig.leader.stored_bytes() < before / 10  # the leader's summary followed
        # Nothing dirty: nothing to do until the tombstone's horizon.
        await rig.compactor.run_once()
        assert rig.compactor.cleaning.cleanings == 1
        await rig.clock.advance(HOUR / 1000)
        await rig.compactor.run_once()
        assert rig.compactor.cleaning.cleanings == 2
        assert [r[1] for r in await rig.latest()] == [b"k%d" % k for k in range(1, 10)]
        # A new leader over the same store reads the same.
        rig.leader = LeaderService(rig.meta, rig.clock)
        view = await rig.leader.changes.cleaning_view(rig.sid)
        hwm, entries = view.high_watermark, view.entries
        assert hwm == 501 and entries[-1].last_offset == 500  # the last offset kept
        await rig.meta.close()

    asyncio.run(run())


def test_a_refused_cleaning_swap_deletes_its_objects(tmp_path: Path) -> None:
    async def run() -> None:
        rig = _CleaningRig(tmp_path, ManualClock())
        await rig.setup()
        for u in range(5):
            await rig.produce_keyed([(b"a", b"%d" % u), (b"b", b"%d" % u)])
        await rig.clock.advance(2 * HOUR / 1000)
        real_swap = rig.leader.changes.swap

        async def truncating_swap(sid, epoch, old, new, **kw):  # type: ignore[no-untyped-def]
            if any(clean_mark(e.object_key)[0] for e in new):
                await rig.leader.delete_records(sid, 10)  # lands between PUT and swap
            return await real_swap(sid, epoch, old, new, **kw)

        rig.leader.changes.swap = truncating_swap  # type: ignore[method-assign]
        await rig.compactor.run_once()
        assert rig.compactor.cleaning.swaps_refused == 1
        keys = await rig.store.list("streams/")
        assert not any(clean_mark(o.key)[0] for o in keys)  # the cleaned objects went at once
        rig.leader.changes.swap = real_swap  # type: ignore[method-assign]
        for u in range(2):
            await rig.produce_keyed([(b"a", b"%d" % u), (b"b", b"%d" % u)])
        await rig.clock.advance(2 * HOUR / 1000)
        await rig.compactor.run_once()
        assert rig.compactor.cleaning.cleanings == 1
        assert await rig.latest() == [(12, b"a", b"1"), (13, b"b", b"1")]
        await rig.meta.close()

    asyncio.run(run())
