"""Markers against Apache Kafka's own bytes: the golden logs in golden/ were written by a
real Kafka 4.3.1 broker (capture_golden.py), with librdkafka's transactional producer
(transaction.version 1: the epoch stays) and Kafka's Java producer (version 2: every
EndTxn bumps it). Our decoder reads Kafka's markers, our encoder writes them byte for byte,
and the partition rules replayed over the logs answer what Kafka answered."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from kio.schema.errors import ErrorCode as E

from zonegate.records.batch import CorruptBatch, iter_batches
from zonegate.records.build import build_batch
from zonegate.transactions.markers import EndTxnMarker, decode_marker, encode_marker, is_marker
from zonegate.transactions.partition_txns import PartitionTxns

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parent / "golden"
LOGS = ["txn-log.bin", "txn-log-java.bin"]


def batches(name: str) -> list[bytes]:
    data = (GOLDEN / name).read_bytes()
    return [data[pos : pos + h.size] for pos, h in iter_batches(data)]


@pytest.mark.parametrize("name", LOGS)
def test_kafkas_markers_decode_and_encode_byte_for_byte(name: str) -> None:
    markers = [b for b in batches(name) if is_marker(b)]
    assert len(markers) in (2, 3)
    for raw in markers:
        m = decode_marker(raw)
        (_, h), *_ = iter_batches(raw)
        again = encode_marker(
            m.producer_id,
            m.producer_epoch,
            m.coordinator_epoch,
            m.commit,
            m.timestamp_ms,
            base_offset=h.base_offset,
            partition_leader_epoch=h.partition_leader_epoch,
        )
        assert again == raw


def test_librdkafka_log_commits_aborts_and_commits() -> None:
    got = [decode_marker(b) for b in batches("txn-log.bin") if is_marker(b)]
    assert [(m.commit, m.producer_epoch, m.coordinator_epoch) for m in got] == [
        (True, 0, 0),
        (False, 0, 0),
        (True, 0, 0),
    ]


def test_java_producer_log_bumps_the_epoch_at_every_end() -> None:
    """transaction.version 2 as Kafka writes it: each marker one epoch above the data of
    its transaction, and the next transaction's data at that epoch from sequence 0."""
    seen = []
    for raw in batches("txn-log-java.bin"):
        (_, h), *_ = iter_batches(raw)
        seen.append((h.is_control, h.producer_epoch, h.base_sequence))
    assert seen == [(False, 0, 0), (True, 1, -1), (False, 1, 0), (True, 2, -1)]


@pytest.mark.parametrize("name", LOGS)
def test_the_partition_rules_replayed_over_kafkas_log_answer_what_kafka_answered(
    name: str,
) -> None:
    p = PartitionTxns()
    end = 0
    for raw in batches(name):
        (_, h), *_ = iter_batches(raw)
        c = p.cycle()
        if h.is_control:
            m = decode_marker(raw)
            out = c.marker(
                m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit, h.base_offset, 0
            )
            assert out.error == E.none
        else:
            guard = None
            if p.needs_verification(h.producer_id, h.producer_epoch, h.is_transactional):
                guard = p.begin_verification(h.producer_id, h.producer_epoch, h.base_sequence, 0)
            err = c.data_batch(
                h.producer_id, h.producer_epoch, h.base_sequence, True, h.base_offset, 0, guard
            )
            assert err == E.none
            assert p.last_stable_offset(h.base_offset) == h.base_offset
        p.apply(c)
        end = h.base_offset + h.last_offset_delta + 1
    assert p.last_stable_offset(end) == end
    if name == "txn-log.bin":
        kafka = json.loads((GOLDEN / "txn-log.json").read_text())
        assert end == kafka["high_watermark"] and end == kafka["last_stable_offset"]
        got = [[a.producer_id, a.first_offset] for a in p.aborted_in_range(0, end)]
        assert got == kafka["aborted_transactions"]
    else:
        assert p.aborted == []
        # the ended transaction's epoch is fenced now: a zombie's late write is refused
        c = p.cycle()
        assert c.data_batch(1, 0, 1, True, end, 0, None) == E.invalid_producer_epoch


def test_a_data_batch_is_not_a_marker() -> None:
    data = build_batch([(b"k", b"v", (), 1)], producer_id=1, producer_epoch=0, base_sequence=0)
    assert not is_marker(data)
    with pytest.raises(CorruptBatch, match="not a control batch"):
        decode_marker(data)


def _control(key: bytes, value: bytes) -> bytes:
    """A control batch with any key and value (a leader-change record, a short value)."""
    raw = bytearray(encode_marker(1, 0, 0, True, 5))
    body = bytes([0, 0, 0]) + _len(key) + key + _len(value) + value + bytes([0])
    record = _len(body) + body
    out = raw[:61] + record
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def _len(b: bytes) -> bytes:
    return bytes([len(b) << 1])


def test_other_control_records_and_short_values_are_refused() -> None:
    assert decode_marker(_control(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07")) == (
        EndTxnMarker(True, 7, 1, 0, 5)
    )
    with pytest.raises(CorruptBatch, match="type 2"):
        decode_marker(_control(b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x00"))  # leader change
    with pytest.raises(CorruptBatch, match="at least 6"):
        decode_marker(_control(b"\x00\x00\x00\x01", b"\x00\x00\x00"))
    with pytest.raises(CorruptBatch, match="version -1"):
        decode_marker(_control(b"\x00\x00\x00\x01", b"\xff\xff\x00\x00\x00\x00"))


def test_a_newer_value_version_is_read_as_version_zero() -> None:
    m = decode_marker(_control(b"\x00\x00\x00\x00", b"\x00\x03\x00\x00\x00\x09\xff\xff"))
    assert (m.commit, m.coordinator_epoch) == (False, 9)


def test_a_damaged_marker_fails_its_crc() -> None:
    raw = bytearray(encode_marker(1, 0, 0, True, 5))
    raw[-2] ^= 1
    with pytest.raises(CorruptBatch):
        decode_marker(bytes(raw))
