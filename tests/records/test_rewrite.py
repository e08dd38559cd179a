"""Timestamps read from records, batches stamped and recompressed, as the produce path does."""

from __future__ import annotations

import pytest

from zonegate.records.batch import validate_batches
from zonegate.records.build import build_batch
from zonegate.records.decode import decode_records
from zonegate.records.rewrite import LOG_APPEND_TIME, recompress, record_times, stamp

pytestmark = pytest.mark.unit

RECS = [(b"k", b"v" * 100, (), 1_700_000_000_500), (None, b"w", (), 1_700_000_000_100)]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_record_times_and_the_walk_agree(codec: int) -> None:
    batch = build_batch(RECS, compression=codec)
    times: list[tuple[int, int] | None] = []
    (h,) = validate_batches(batch, times)
    assert record_times(h, batch, 1 << 20) == [1_700_000_000_500, 1_700_000_000_100]
    assert times == [None if codec else (1_700_000_000_100, 1_700_000_000_500)]


def test_stamp_sets_type_max_timestamp_and_a_valid_crc() -> None:
    batch = bytearray(build_batch(RECS))
    stamp(batch, LOG_APPEND_TIME, 1_800_000_000_000)
    (h,) = validate_batches(bytes(batch))  # the CRC holds
    assert (h.timestamp_type, h.max_timestamp) == (1, 1_800_000_000_000)
    assert {r.timestamp for r in decode_records(bytes(batch))} == {1_800_000_000_000}


@pytest.mark.parametrize(("source", "target"), [(0, 4), (1, 0), (2, 3), (4, 1)])
def test_recompress_keeps_every_record(source: int, target: int) -> None:
    batch = build_batch(RECS, compression=source, producer_id=7, producer_epoch=1, base_sequence=3)
    (h,) = validate_batches(batch)
    out = recompress(h, batch, target, 1 << 20)
    (h2,) = validate_batches(out)
    assert h2.compression == target
    assert (h2.producer_id, h2.base_sequence, h2.record_count) == (7, 3, 2)
    assert decode_records(out) == decode_records(batch)
