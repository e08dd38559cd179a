"""Cleaning of transactional data (storage/cleaner.py with storage/txn_cleaning.py): Kafka's
LogCleaner rules. An aborted transaction's records go at the first round; commit and
abort markers stay until the delete horizon set once their transaction has no batch
left, then go; an open transaction (at or above the LSO) is never touched; committed
records follow the key rules; a producer's last batch stays (empty) for its state; a
read_committed reader sees the same before and after. Compaction copies markers as
bytes, like any batch.

Real batches (records/build.py, transactions/markers.py), the cleaner's pure
functions as the compactor calls them, and a read_committed reader that follows
Kafka's Java consumer (CompletedFetch: skip a producer named by an aborted
transaction from its first offset until its ABORT marker)."""

from __future__ import annotations

import heapq
import random

import pytest

from zonegate.records.batch import BatchHeader, iter_batches
from zonegate.records.build import build_batch
from zonegate.records.decode import decode_records
from zonegate.records.retain import DELETE_HORIZON_FLAG
from zonegate.storage.cleaner import (
    CleanerConfig,
    CleanerStats,
    build_cleaned_objects,
    build_offset_map,
    clean,
    plan_cleaning,
)
from zonegate.storage.index import IndexEntry
from zonegate.storage.stream_objects import build_stream_object
from zonegate.storage.txn_cleaning import CleanedTransactions, control_type
from zonegate.transactions.markers import ABORT, decode_marker, encode_marker
from zonegate.transactions.partition_txns import AbortedTxn, PartitionTxns

pytestmark = pytest.mark.unit

MIN = 60_000
HOUR = 60 * MIN
T0 = 1_700_000_000_000 // HOUR * HOUR
SID = 9
Rec = tuple[bytes, bytes | None]


class Log:
    """A compacted partition with transactions: what its leader keeps (the aborted index,
    the LSO, producer state) and the compactor's moves."""

    def __init__(self, config: CleanerConfig) -> None:
        self.config = config
        self.entries: list[IndexEntry] = []
        self.objects: dict[str, bytes] = {}
        self.next_offset = 0
        self.open: dict[int, int] = {}  # producer -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []
        self.last_data: dict[int, int] = {}  # producer state, as the leader hands it over
        self.marker_epochs: dict[int, int] = {}
        self.keep_state = False  # whether producers stay active (else they expired)

    def _append(self, batch: bytes, count: int, at: int) -> None:
        wal = IndexEntry(
            self.next_offset, self.next_offset + count - 1, "wal/1/x", 0, len(batch), at, at
        )
        obj = build_stream_object(SID, 1, [(wal, batch)], segment_ms=self.config.segment_ms)
        self.objects[obj.key] = obj.data
        self.entries += obj.entries
        self.next_offset += count

    def write(self, records: list[Rec], at: int, pid: int = -1, epoch: int = 0) -> int:
        """A batch; transactional when `pid` is given (opening its transaction here)."""
        base = self.next_offset
        batch = build_batch(
            [(k, v, (), at) for k, v in records],
            producer_id=pid,
            producer_epoch=epoch if pid >= 0 else -1,
            base_sequence=0 if pid >= 0 else -1,
            is_transactional=pid >= 0,
        )
        self._append(batch, len(records), at)
        if pid >= 0:
            self.open.setdefault(pid, base)
            if self.keep_state:
                self.last_data[pid] = base + len(records) - 1
        return base

    def end(self, pid: int, commit: bool, at: int, epoch: int = 0) -> int:
        """The coordinator's marker, and what the leader's rules make of it."""
        offset = self.next_offset
        self._append(encode_marker(pid, epoch, 0, commit, at), 1, at)
        first = self.open.pop(pid, None)
        if first is not None and not commit:
            self.aborted.append(AbortedTxn(pid, first, offset, self.lso()))
        return offset

    def lso(self) -> int:
        return min(self.open.values(), default=self.next_offset)

    def read(self, e: IndexEntry) -> bytes:
        return self.objects[e.object_key][e.position : e.position + e.length]

    def run_cleaning(self, now: int) -> CleanerStats | None:
        """What maintenance/cleaning.py does; None when nothing is due."""
        plan = plan_cleaning(self.entries, self.config, now, stable_offset=self.lso())
        if plan is None or not plan.due:
            return None
        offsets = build_offset_map(
            [(e, self.read(e)) for e in plan.dirty],
            plan,
            self.config.max_message_bytes,
            aborted=self.aborted,
        )
        old = plan.entries(offsets.end)
        txns = CleanedTransactions(self.aborted)
        stats = CleanerStats()
        parts: list = []  # type: ignore[type-arg]
        for half in (old[: len(old) // 2], old[len(old) // 2 :]):  # groups share `txns`
            parts += clean(
                [(e, self.read(e)) for e in half],
                offsets,
                self.config,
                now,
                active_producers=self.last_data,
                marker_producers=self.marker_epochs,
                txns=txns,
                stats=stats,
            )
        objs = build_cleaned_objects(
            SID, 1, parts, segment_ms=self.config.segment_ms, object_bytes=1 << 20
        )
        i = self.entries.index(old[0])
        self.entries[i : i + len(old)] = [e for o in objs for e in o.entries]
        for o in objs:
            self.objects[o.key] = o.data
        gone = {a.last_offset for a in txns.dropped(offsets.end)}
        self.aborted = [a for a in self.aborted if a.last_offset not in gone]
        return stats

    def batches(self) -> list[tuple[BatchHeader, bytes]]:
        out = []
        for e in self.entries:
            blob = self.read(e)
            out += [(h, blob[pos : pos + h.size]) for pos, h in iter_batches(blob)]
        return out

    def records(self) -> list[tuple[int, bytes | None, bytes | None]]:
        """read_uncommitted: every data record."""
        return [
            (r.offset, r.key, r.value)
            for h, b in self.batches()
            if not h.is_control
            for r in decode_records(b)
        ]

    def markers(self) -> list[tuple[int, int]]:
        """(offset, record count) of every control batch."""
        return [(h.base_offset, h.record_count) for h, _ in self.batches() if h.is_control]

    def read_committed(
        self, aborted: list[AbortedTxn] | None = None
    ) -> list[tuple[int, bytes | None, bytes | None]]:
        """A read_committed fetch from the log start, as the leader answers it
        (`aborted_in_range` up to the LSO) and Kafka's Java consumer filters it."""
        lso = self.lso()
        index = PartitionTxns.load([], self.aborted if aborted is None else aborted)
        pending = [(a.first_offset, a.producer_id) for a in index.aborted_in_range(0, lso)]
        heapq.heapify(pending)
        skipping: set[int] = set()
        out = []
        for h, b in self.batches():
            last = h.base_offset + h.last_offset_delta
            if last >= lso:
                break
            while pending and pending[0][0] <= last:
                skipping.add(heapq.heappop(pending)[1])
            if h.is_control:
                if h.record_count and decode_marker(b).commit is False:
                    skipping.discard(h.producer_id)
                continue
            if h.is_transactional and h.producer_id in skipping:
                continue
            out += [(r.offset, r.key, r.value) for r in decode_records(b)]
        return out


def _config(**kw: object) -> CleanerConfig:
    base: dict[str, object] = dict(
        min_cleanable_dirty_ratio=0.0, delete_retention_ms=HOUR, segment_ms=HOUR
    )
    base.update(kw)
    return CleanerConfig(**base)  # type: ignore[arg-type]


def test_aborted_records_go_at_once_and_markers_only_after_the_delete_horizon() -> None:
    log = Log(_config())
    t = T0
    log.write([(b"k1", b"v0")], t)  # 0
    log.write([(b"k1", b"aborted"), (b"k2", b"aborted")], t, pid=1)  # 1-2
    log.end(1, False, t)  # 3
    log.write([(b"k3", b"c3")], t, pid=2)  # 4
    log.end(2, True, t)  # 5
    log.write([(b"k4", b"x")], t)  # 6
    visible = [(0, b"k1", b"v0"), (4, b"k3", b"c3"), (6, b"k4", b"x")]
    assert log.read_committed() == visible
    assert log.aborted == [AbortedTxn(1, 1, 3, 4)]

    # Round 1: the aborted records go (and never hid k1's committed value in the offset
    # map); both markers stay, their transactions' batches were met in this round; the
    # aborted entry stays with its marker.
    stats = log.run_cleaning(t + 2 * HOUR)
    assert stats is not None and stats.aborted_dropped == 2 and stats.markers_dropped == 0
    assert log.records() == visible
    assert log.markers() == [(3, 1), (5, 1)]
    assert log.aborted == [AbortedTxn(1, 1, 3, 4)]
    assert log.read_committed() == visible
    headers = {h.base_offset: h for h, _ in log.batches()}
    assert not headers[3].attributes & DELETE_HORIZON_FLAG

    # Round 2 (new dirt makes it due, and supersedes k3's committed value): no batch of
    # the aborted transaction is left, so its marker gets its delete horizon and its
    # entry leaves the index; the commit marker stays, its batch was met this round.
    log.write([(b"k3", b"y")], t + 2 * HOUR)  # 7
    now = t + 4 * HOUR
    stats = log.run_cleaning(now)
    assert stats is not None and stats.markers_dropped == 0
    assert log.markers() == [(3, 1), (5, 1)]
    assert log.aborted == []
    horizon = now + HOUR
    marks = {h.base_offset: (h, b) for h, b in log.batches() if h.is_control}
    assert marks[3][0].attributes & DELETE_HORIZON_FLAG and marks[3][0].base_timestamp == horizon
    assert decode_marker(marks[3][1]).producer_id == 1  # still the marker
    assert not marks[5][0].attributes & DELETE_HORIZON_FLAG
    now_visible = [(0, b"k1", b"v0"), (6, b"k4", b"x"), (7, b"k3", b"y")]
    assert log.read_committed() == now_visible

    # Not before the horizon; at it the abort marker goes (the clean mark makes the
    # round due), and the commit marker, its transaction empty now, gets its own.
    assert log.run_cleaning(horizon - 1) is None
    stats = log.run_cleaning(horizon)
    assert stats is not None and stats.markers_dropped == 1
    assert log.markers() == [(5, 1)]
    (h5,) = [h for h, _ in log.batches() if h.is_control]
    assert h5.attributes & DELETE_HORIZON_FLAG and h5.base_timestamp == horizon + HOUR
    stats = log.run_cleaning(horizon + HOUR)
    assert stats is not None and stats.markers_dropped == 1
    assert log.markers() == []
    assert log.read_committed() == now_visible
    assert log.run_cleaning(horizon + 10 * HOUR) is None


def test_committed_transactional_records_follow_the_key_rules() -> None:
    log = Log(_config())
    t = T0
    log.write([(b"a", b"plain-1"), (b"b", b"plain-1")], t)  # 0-1
    log.write([(b"a", b"txn"), (b"c", b"txn")], t, pid=4)  # 2-3
    log.end(4, True, t)  # 4
    log.write([(b"c", b"plain-2")], t)  # 5
    assert log.run_cleaning(t + 2 * HOUR) is not None
    # a: the committed transactional value wins over the older plain one; c: the newer
    # plain value wins over the transactional one; b untouched. The marker stays (its
    # transaction's batch was met in this round).
    assert log.records() == [(1, b"b", b"plain-1"), (2, b"a", b"txn"), (5, b"c", b"plain-2")]
    assert log.markers() == [(4, 1)]


def test_an_open_transaction_is_never_touched() -> None:
    log = Log(_config())
    t = T0
    for u in range(3):
        log.write([(b"k", b"old-%d" % u)], t)  # 0-2
    first = log.write([(b"k", b"open")], t + HOUR, pid=3)  # 3, in the next segment
    log.write([(b"k", b"after")], t + HOUR)  # 4
    above = [(e, log.read(e)) for e in log.entries if e.last_offset >= first]
    assert log.lso() == first
    assert log.run_cleaning(t + 3 * HOUR) is not None
    # Below the LSO's segment: cleaned; from it on: the same entries, the same bytes
    # (k's later values do not reach back past the LSO into the open transaction).
    assert [(e, log.read(e)) for e in log.entries if e.last_offset >= first] == above
    assert log.records() == [(2, b"k", b"old-2"), (3, b"k", b"open"), (4, b"k", b"after")]
    assert log.read_committed() == [(2, b"k", b"old-2")]
    # Committed: the next round cleans it by the key rules.
    log.end(3, True, t + 3 * HOUR)  # 5
    assert log.run_cleaning(t + 5 * HOUR) is not None
    assert log.records() == [(4, b"k", b"after")]
    assert log.read_committed() == [(4, b"k", b"after")]


def test_an_aborted_entry_whose_records_went_leaves_the_index_for_read_committed() -> None:
    """A producer that aborted, then committed: once the abort marker is gone, an index
    entry left behind would make the consumer skip the producer's committed batches
    (it skips a named producer until an ABORT marker)."""
    log = Log(_config())
    t = T0
    log.write([(b"x", b"aborted")], t, pid=7)  # 0
    log.end(7, False, t)  # 1
    stale = list(log.aborted)
    log.write([(b"y", b"committed")], t, pid=7)  # 2
    log.end(7, True, t)  # 3
    assert log.read_committed() == [(2, b"y", b"committed")]
    now = t + 2 * HOUR
    for _ in range(3):  # records, then the horizon, then the markers
        log.write([(b"z", b"%d" % now)], now - HOUR)
        assert log.run_cleaning(now) is not None
        now += 2 * HOUR
    # The abort marker went; the commit marker stays while its record does.
    assert log.markers() == [(3, 1)] and log.aborted == []
    got = log.read_committed()
    assert (2, b"y", b"committed") in got
    # The same log read with the entry kept: the committed record would be lost.
    assert (2, b"y", b"committed") not in log.read_committed(stale)


def test_a_producers_last_batch_stays_for_its_state() -> None:
    """Kafka's isBatchLastRecordOfProducer: an active producer's last data batch stays,
    empty, though aborted (so its aborted entry stays too); a producer whose state
    holds only a marker of a bumped epoch (TV2) keeps that marker, emptied."""
    log = Log(_config())
    log.keep_state = True
    t = T0
    log.write([(b"a", b"1")], t, pid=1)  # 0
    log.end(1, False, t)  # 1
    log.write([(b"b", b"1")], t, pid=2)  # 2
    log.end(2, True, t, epoch=1)  # 3, TV2: the epoch bumped, no data batch kept
    del log.last_data[2]
    log.marker_epochs[2] = 1
    log.write([(b"b", b"2")], t)  # 4
    now = t + 2 * HOUR
    for _ in range(4):
        log.write([(b"z", b"%d" % now)], now - HOUR)
        log.run_cleaning(now)
        now += 2 * HOUR
    by_offset = {h.base_offset: h for h, _ in log.batches()}
    kept = by_offset[0]  # producer 1's last data: empty, its sequence and epoch kept
    assert (kept.record_count, kept.producer_id, kept.base_sequence) == (0, 1, 0)
    assert kept.is_transactional
    assert log.aborted == [AbortedTxn(1, 0, 1, 2)]  # its batch is still met
    assert by_offset[1].record_count == 1  # its marker: not removable while that is
    marker = by_offset[3]  # producer 2's marker: emptied past its horizon, kept
    assert marker.is_control and marker.record_count == 0 and marker.producer_epoch == 1
    assert 2 not in by_offset  # its committed record went by the key rules
    assert log.read_committed()[-1][1] == b"z"


def test_compaction_copies_markers_as_bytes() -> None:
    """WAL ranges into a stream object (storage/stream_objects.py): a marker is copied
    as any batch, its base offset set, and still reads as the same marker."""
    data = build_batch([(b"k", b"v", (), T0)], producer_id=5, producer_epoch=0,
                       base_sequence=0, is_transactional=True)  # fmt: skip
    marker = encode_marker(5, 0, 3, False, T0 + 1)
    parts = [
        (IndexEntry(40, 40, "wal/1/a", 0, len(data), T0, T0), data),
        (IndexEntry(41, 41, "wal/1/b", 0, len(marker), T0 + 1, T0), marker),
    ]
    obj = build_stream_object(SID, 1, parts, segment_ms=HOUR)
    assert obj.data[len(data) :] == encode_marker(5, 0, 3, False, T0 + 1, base_offset=41)
    h = [h for _, h in iter_batches(obj.data)][1]
    assert (h.is_control, h.base_offset) == (True, 41)
    m = decode_marker(obj.data[len(data) :])
    assert (m.commit, m.coordinator_epoch, m.producer_id) == (False, 3, 5)


def test_control_types_other_than_markers_are_kept() -> None:
    assert control_type(b"\x00\x00\x00\x00") == ABORT
    assert control_type(b"\x00\x00\x00\x05") < 0 and control_type(None) < 0


@pytest.mark.parametrize("active", [False, True], ids=["expired", "active"])
@pytest.mark.parametrize("seed", range(12))
def test_read_committed_sees_the_same_latest_values_after_any_cleaning(
    seed: int, active: bool
) -> None:
    """A random walk of plain writes, transactions of three producers (committed,
    aborted, some left open a while) and cleaning rounds at moving times, beside the
    same log never cleaned: under read_committed, each key's latest value is the same,
    every record read after cleaning was readable before (no aborted read), and no
    committed record is lost that is the latest of its key. With the producers active,
    their last batches stay (empty) and so may their aborted entries."""
    rng = random.Random(seed)
    cleaned, mirror = Log(_config()), Log(_config())
    cleaned.keep_state = active
    t = T0
    keys = [b"k%d" % i for i in range(6)]

    def both(op: str, *args: object, **kw: object) -> None:
        getattr(cleaned, op)(*args, **kw)
        getattr(mirror, op)(*args, **kw)

    for step in range(120):
        t += rng.randint(1, 20) * MIN
        roll = rng.random()
        pid = rng.randint(1, 3)
        if roll < 0.35:
            value = None if rng.random() < 0.1 else b"p%d" % step
            both("write", [(rng.choice(keys), value)], t)
        elif roll < 0.7:
            both("write", [(rng.choice(keys), b"t%d-%d" % (pid, step))], t, pid=pid)
        elif roll < 0.85 and pid in mirror.open:
            both("end", pid, rng.random() < 0.5, t)
        else:
            cleaned.run_cleaning(t)
            assert cleaned.lso() == mirror.lso()
            after = cleaned.read_committed()
            before = mirror.read_committed()
            assert set(after) <= set(before)

            def latest(rows: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes]:
                out: dict[bytes, bytes | None] = {}
                for _, k, v in rows:
                    assert k is not None
                    out[k] = v
                return {k: v for k, v in out.items() if v is not None}

            assert latest(after) == latest(before)
    for pid in list(mirror.open):
        both("end", pid, True, t)
    for _ in range(4):
        t += 3 * HOUR
        both("write", [(b"tick", b"%d" % t)], t - 2 * HOUR)
        cleaned.run_cleaning(t)

    # Every transaction ended long ago, no producer is active: only the markers of
    # the last rounds may be left, none with records of an aborted transaction.
    def aborted(h: BatchHeader) -> bool:
        return any(
            a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset
            for a in mirror.aborted
        )

    left = [h for h, _ in cleaned.batches() if not h.is_control and h.record_count]
    assert not [h for h in left if h.is_transactional and aborted(h)]
    if not active:
        assert cleaned.aborted == []
    assert set(cleaned.aborted) <= set(mirror.aborted)
    assert len(cleaned.markers()) < len(mirror.markers()) or not mirror.markers()
