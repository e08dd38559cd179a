"""Property: whatever build_batch writes, validate_batches accepts and decode_records returns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zonegate.records.batch import CorruptBatch, iter_batches, patch_batch, validate_batches
from zonegate.records.build import build_batch
from zonegate.records.decode import Record, decode_records

pytestmark = pytest.mark.unit

_opt_bytes = st.none() | st.binary(max_size=300)
_record = st.tuples(
    _opt_bytes,
    _opt_bytes,
    st.lists(st.tuples(st.text(max_size=10), _opt_bytes), max_size=4),
    st.integers(min_value=-(2**40), max_value=2**42),
)
_batch = st.tuples(
    st.lists(_record, min_size=1, max_size=30),
    st.sampled_from([0, 1, 2, 3, 4]),
    st.integers(min_value=0, max_value=1),  # timestamp type
)


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(_batch, min_size=1, max_size=4), base=st.integers(0, 2**62))
def test_build_validate_decode(
    batches: list[
        tuple[
            list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]], int, int
        ]
    ],
    base: int,
) -> None:
    blob = bytearray()
    expected: list[Record] = []
    offset = base
    for recs, codec, ts_type in batches:
        batch = build_batch(recs, compression=codec, timestamp_type=ts_type)
        pos = len(blob)
        blob += batch
        patch_batch(blob, pos, offset, 3)  # as fetch does, after the CRC was written
        max_ts = max(ts for *_, ts in recs)
        expected += [
            Record(offset + i, max_ts if ts_type else ts, k, v, tuple(h))
            for i, (k, v, h, ts) in enumerate(recs)
        ]
        offset += len(recs)
    headers = validate_batches(bytes(blob))
    assert [h.record_count for h in headers] == [len(r) for r, _, _ in batches]
    assert [h.compression for h in headers] == [c for _, c, _ in batches]
    assert [h for _, h in iter_batches(blob)] == headers
    assert decode_records(bytes(blob)) == expected


@settings(max_examples=200, deadline=None)
@given(recs=st.lists(_record, min_size=1, max_size=10), data=st.data())
def test_any_flipped_bit_is_caught(
    recs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    data: st.DataObject,
) -> None:
    """A bit flipped anywhere the CRC or the framing covers is refused."""
    batch = bytearray(build_batch(recs))
    # Bytes 0-7 (base offset) and 12-15 (leader epoch) are outside the CRC on purpose.
    at = data.draw(st.integers(8, len(batch) - 1).filter(lambda i: not 12 <= i < 16))
    batch[at] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(CorruptBatch):
        validate_batches(bytes(batch))
