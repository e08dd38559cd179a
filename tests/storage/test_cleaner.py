"""Key-based cleaning (storage/cleaner.py): Kafka's log cleaner over stream objects, run as
the compactor runs it, the output read back by our decoder and by kafka-python's."""

from __future__ import annotations

import dataclasses
import random

import pytest
from kafka.record import MemoryRecords

from zonegate.records.batch import iter_batches
from zonegate.records.build import build_batch
from zonegate.records.decode import decode_records
from zonegate.records.retain import DELETE_HORIZON_FLAG
from zonegate.storage.cleaner import (
    CleanerConfig,
    CleanerStats,
    build_cleaned_objects,
    build_offset_map,
    clean,
    clean_mark,
    plan_cleaning,
)
from zonegate.storage.index import IndexEntry
from zonegate.storage.stream_objects import build_stream_object

pytestmark = pytest.mark.unit

MIN = 60_000
HOUR = 60 * MIN
T0 = 1_700_000_000_000 // HOUR * HOUR  # a segment window's start
SID = 7


class Partition:
    """A compacted partition as the index and the bucket hold it, with the compactor's
    moves: WAL batches compacted into stream objects, and cleaning rounds."""

    def __init__(self, config: CleanerConfig) -> None:
        self.config = config
        self.entries: list[IndexEntry] = []
        self.objects: dict[str, bytes] = {}
        self.next_offset = 0
        self.producers: dict[int, int] = {}

    def produce(
        self,
        records: list[tuple[bytes | None, bytes | None]],
        at: int,
        *,
        compression: int = 0,
        producer_id: int = -1,
        sequence: int = -1,
        timestamp_type: int = 0,
    ) -> None:
        """One batch produced at `at` and compacted at once into its own stream object."""
        batch = build_batch(
            [(k, v, (("h", b"1"),), at + i) for i, (k, v) in enumerate(records)],
            compression=compression,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=sequence,
            timestamp_type=timestamp_type,
        )
        n = len(records)
        wal = IndexEntry(
            self.next_offset, self.next_offset + n - 1, "wal/1/x", 0, len(batch), at + n - 1, at
        )
        obj = build_stream_object(SID, 1, [(wal, batch)], segment_ms=self.config.segment_ms)
        self.objects[obj.key] = obj.data
        self.entries += obj.entries
        if producer_id >= 0:
            self.producers[producer_id] = self.next_offset + n - 1
        self.next_offset += n

    def read(self, e: IndexEntry) -> bytes:
        return self.objects[e.object_key][e.position : e.position + e.length]

    def run_cleaning(self, now: int, *, max_keys: int = 4_000_000) -> CleanerStats | None:
        """What the compactor does for a compacted partition; None when nothing is due."""
        plan = plan_cleaning(self.entries, self.config, now)
        if plan is None or not plan.due:
            return None
        offsets = build_offset_map(
            ((e, self.read(e)) for e in plan.dirty),
            plan,
            self.config.max_message_bytes,
            max_keys=max_keys,
        )
        old = plan.entries(offsets.end)
        stats = CleanerStats()
        parts = clean(
            [(e, self.read(e)) for e in old],
            offsets,
            self.config,
            now,
            active_producers=self.producers,
            stats=stats,
        )
        objs = build_cleaned_objects(
            SID, 1, parts, segment_ms=self.config.segment_ms, object_bytes=1 << 20
        )
        new = [e for o in objs for e in o.entries]
        for o in objs:
            self.objects[o.key] = o.data
        i = self.entries.index(old[0])
        assert self.entries[i : i + len(old)] == old
        self.entries[i : i + len(old)] = new
        return stats

    def blob(self) -> bytes:
        return b"".join(self.read(e) for e in self.entries)

    def records(self) -> list[tuple[int, bytes | None, bytes | None, int]]:
        """Every record as our decoder reads it, checked against kafka-python's parser."""
        ours = [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(self.blob())]
        theirs = []
        mr = MemoryRecords(self.blob())
        while (batch := mr.next_batch()) is not None:
            assert batch.validate_crc()
            theirs += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
        assert ours == theirs
        return ours


def _config(**kw: object) -> CleanerConfig:
    base = dict(
        min_cleanable_dirty_ratio=0.5,
        delete_retention_ms=HOUR,
        segment_ms=MIN,
        segment_bytes=1 << 30,
    )
    base.update(kw)
    return CleanerConfig(**base)  # type: ignore[arg-type]


def _fill(p: Partition, keys: int, updates: int, tombstones: int, **kw: int) -> dict[bytes, int]:
    """`keys` keys updated `updates` times over 10 minutes (batches of 10 records), then
    `tombstones` keys deleted; returns the offset of each key's last record."""
    last: dict[bytes, int] = {}
    rng = random.Random(5)
    pending: list[tuple[bytes | None, bytes | None]] = []
    at = T0
    order = [(k, u) for u in range(updates) for k in range(keys)]
    for k, u in order:
        pending.append((b"k%03d" % k, b"v%03d-%04d" % (k, u)))
        if len(pending) == 10:
            p.produce(pending, at, **kw)
            for i, (key, _) in enumerate(pending):
                assert key is not None
                last[key] = p.next_offset - 10 + i
            pending = []
            at += rng.randint(100, 600)
    for k in range(tombstones):
        p.produce([(b"k%03d" % k, None)], at, **kw)
        last[b"k%03d" % k] = p.next_offset - 1
    return last


def test_latest_value_per_key_survives_and_tombstones_go_after_delete_retention() -> None:
    p = Partition(_config())
    last = _fill(p, keys=20, updates=200, tombstones=5)
    assert len(p.records()) == 4005
    now = T0 + 30 * MIN  # the last segment's window has closed
    stats = p.run_cleaning(now)
    assert stats is not None and stats.records_read == 4005
    recs = p.records()
    # The latest record of each key, tombstones included (kept for delete.retention.ms),
    # at its original offset.
    assert {r[1]: r[0] for r in recs} == last
    assert [r[0] for r in recs] == sorted(last.values())
    assert sum(1 for r in recs if r[2] is None) == 5
    assert all(clean_mark(e.object_key)[0] for e in p.entries)
    horizon = now + HOUR
    assert {clean_mark(e.object_key)[1] for e in p.entries} - {None} == {horizon}
    # Values are the last update's, and each record keeps its timestamp.
    assert all(r[2] == b"v%s-0199" % r[1][1:] for r in recs if r[2] is not None)

    # Nothing dirty: not due until the tombstones' horizon.
    assert p.run_cleaning(horizon - 1) is None
    assert p.run_cleaning(horizon) is not None
    recs = p.records()
    assert len(recs) == 15 and all(r[2] is not None for r in recs)
    assert {r[1] for r in recs} == {b"k%03d" % k for k in range(5, 20)}
    # The last offset of the cleaned range stays (an empty batch if need be).
    tail = list(iter_batches(p.blob()))[-1][1]
    assert tail.base_offset + tail.last_offset_delta == 4004
    assert p.run_cleaning(horizon + 10 * HOUR) is None


def test_a_tombstone_batch_carries_its_delete_horizon_in_the_header() -> None:
    p = Partition(_config())
    p.produce([(b"a", b"1"), (b"b", b"1")], T0)
    p.produce([(b"a", None), (b"b", b"2")], T0 + 1000)
    now = T0 + 10 * MIN
    assert p.run_cleaning(now) is not None
    batches = [h for _, h in iter_batches(p.blob())]
    # The first batch is left empty (it ends no round and no producer's sequence); the
    # second kept whole, its base timestamp now the horizon, record times unchanged.
    assert len(batches) == 1
    h = batches[0]
    assert h.attributes & DELETE_HORIZON_FLAG and h.base_timestamp == now + HOUR
    assert p.records() == [(2, b"a", None, T0 + 1000), (3, b"b", b"2", T0 + 1001)]
    assert h.max_timestamp == T0 + 1001


def test_keyless_records_are_dropped_as_kafka_drops_invalid_ones() -> None:
    p = Partition(_config())
    p.produce([(None, b"x"), (b"a", b"1")], T0)
    stats = p.run_cleaning(T0 + 10 * MIN)
    assert stats is not None and stats.keyless_dropped == 1
    assert p.records() == [(1, b"a", b"1", T0 + 1)]


def test_the_batch_holding_a_producers_last_sequence_stays_empty() -> None:
    p = Partition(_config())
    p.produce([(b"a", b"1"), (b"b", b"1")], T0, producer_id=9, sequence=0)
    p.produce([(b"a", b"2"), (b"b", b"2")], T0 + 10, producer_id=4, sequence=0)
    p.produce([(b"c", b"1")], T0 + 20)
    p.producers[9] = 1  # still active, its last batch is at offsets 0-1
    assert p.run_cleaning(T0 + 10 * MIN) is not None
    batches = [h for _, h in iter_batches(p.blob())]
    first = batches[0]
    assert (first.base_offset, first.last_offset_delta, first.record_count) == (0, 1, 0)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (9, 0, 0)
    assert [r[0] for r in p.records()] == [2, 3, 4]


def test_no_cleaning_below_the_dirty_ratio_or_of_the_active_segment() -> None:
    p = Partition(_config(min_cleanable_dirty_ratio=0.5))
    _fill(p, keys=20, updates=20, tombstones=0)
    # The only segment is active while its window is open.
    assert plan_cleaning(p.entries, p.config, T0 + 30_000) is None
    assert p.run_cleaning(T0 + 30 * MIN) is not None
    # A second round of the same size of updates: the ratio passes 0.5.
    clean_bytes = sum(e.length for e in p.entries)
    at = T0 + 31 * MIN
    for u in range(3):
        p.produce([(b"k%03d" % k, b"w%d" % u) for k in range(20)], at + u)
    plan = plan_cleaning(p.entries, p.config, at + 2 * MIN)
    assert plan is not None and plan.clean_bytes == clean_bytes
    dirty = plan.dirty_bytes / (plan.dirty_bytes + clean_bytes)
    assert plan.dirty_ratio == pytest.approx(dirty)
    assert plan.due == (dirty > 0.5)
    p.config = _config(min_cleanable_dirty_ratio=0.99)
    assert p.run_cleaning(at + 2 * MIN) is None


def test_min_compaction_lag_holds_back_young_segments() -> None:
    p = Partition(_config(min_compaction_lag_ms=10 * MIN))
    for m in range(5):  # one batch per minute: five segments
        p.produce([(b"a", b"%d" % m)], T0 + m * MIN)
    now = T0 + 12 * MIN + 1  # segments 0-2 are older than the lag, 3-4 not
    plan = plan_cleaning(p.entries, p.config, now)
    assert plan is not None and plan.end == 3
    assert p.run_cleaning(now) is not None
    assert [r[0] for r in p.records()] == [2, 3, 4]
    assert [clean_mark(e.object_key)[0] for e in p.entries] == [True, False, False]


def test_max_compaction_lag_forces_cleaning_below_the_ratio() -> None:
    cfg = _config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=5 * MIN)
    p = Partition(cfg)
    p.produce([(b"a", b"1")], T0)
    p.produce([(b"a", b"2")], T0 + MIN)
    assert p.run_cleaning(T0 + 3 * MIN) is not None  # first cleaning: all dirty
    p.produce([(b"b", b"1")], T0 + 4 * MIN)
    p.produce([(b"c", b"1")], T0 + 5 * MIN)
    plan = plan_cleaning(p.entries, cfg, T0 + 6 * MIN)
    assert plan is not None and plan.compaction_delay_ms == 0 and not plan.due
    plan = plan_cleaning(p.entries, cfg, T0 + 10 * MIN)
    assert plan is not None and plan.compaction_delay_ms > 0 and plan.due
    assert plan.dirty_ratio < 0.99


def test_the_wal_tail_is_never_cleaned() -> None:
    p = Partition(_config())
    p.produce([(b"a", b"1")], T0)
    p.produce([(b"a", b"2")], T0 + MIN)
    tail = IndexEntry(2, 2, "wal/1/9", 0, 80, T0 + MIN + 5, T0 + MIN + 5)
    plan = plan_cleaning([*p.entries, tail], p.config, T0 + 30 * MIN)
    assert plan is not None and plan.end == 1  # the tail's segment starts at 1


def test_offset_map_bound_ends_the_round_early_and_the_rest_stays_dirty() -> None:
    p = Partition(_config())
    for b in range(4):
        p.produce([(b"k%d-%d" % (b, i), b"v") for i in range(10)], T0 + b)
    stats = p.run_cleaning(T0 + 10 * MIN, max_keys=15)
    assert stats is not None and stats.records_read == 20
    marks = [clean_mark(e.object_key)[0] for e in p.entries]
    assert marks[0] and marks[-2:] == [False, False]
    assert len(p.records()) == 40


@pytest.mark.parametrize("source", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("topic", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_in_topic_compression_out(source: int, topic: str) -> None:
    codecs = {"producer": None, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    p = Partition(_config(codec=codecs[topic]))
    last = _fill(p, keys=5, updates=20, tombstones=1, compression=source)
    assert p.run_cleaning(T0 + 30 * MIN) is not None
    assert {r[1]: r[0] for r in p.records()} == last
    want = source if codecs[topic] is None else codecs[topic]
    # Every batch that was rewritten has the topic's codec (untouched ones kept theirs,
    # and those match when the topic's codec is the source's or `producer`).
    for _, h in iter_batches(p.blob()):
        assert h.compression in (want, source)
        if h.record_count < 10:
            assert h.compression == want or h.record_count == 0


def test_clean_mark_round_trip() -> None:
    key = "streams/7/00000000000000000000-00000000000000000009-2-0a1b2c3d"
    assert clean_mark(key) == (False, None)
    assert clean_mark(key + "-c") == (True, None)
    assert clean_mark(key + "-c1700000000000") == (True, 1_700_000_000_000)
    assert clean_mark("wal/1/2-c") == (False, None)
    # A random token that starts with c and then holds only digits is no mark: read as
    # one, an uncleaned object of the active segment was taken for a clean one whose
    # tombstones were due, and cleaned at once (one stream object key in about 430).
    token = "streams/7/00000000000000000000-00000000000000000109-0-c4769217"
    assert clean_mark(token) == (False, None)
    assert clean_mark(token + "-c") == (True, None)
    assert clean_mark(token + "-c42") == (True, 42)
    assert clean_mark("streams/7/00000000000000000000-00000000000000000009--1-c0-c") == (True, None)
    e = IndexEntry(0, 9, key, 0, 10, 0)
    assert dataclasses.replace(e, object_key=key + "-c").object_key.endswith("-c")


def test_log_append_time_batches_keep_their_time_through_a_horizon() -> None:
    p = Partition(_config())
    p.produce([(b"a", b"1"), (b"b", b"1"), (b"a", None)], T0, timestamp_type=1)
    assert p.run_cleaning(T0 + 10 * MIN) is not None
    (h,) = [h for _, h in iter_batches(p.blob())]
    assert h.timestamp_type == 1 and h.attributes & DELETE_HORIZON_FLAG
    # Both readers give every record the batch's append time, as before the cleaning.
    assert p.records() == [(1, b"b", b"1", T0 + 2), (2, b"a", None, T0 + 2)]
